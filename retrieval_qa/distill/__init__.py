"""Distillation of the pipeline's cross-encoder reranker into one dual encoder.

* :mod:`.questions`: the training questions it uses (the training side of the training file,
  less the questions the reranker trained on) and the sentences their lists come from;
* :mod:`.lists`: each question's list (its gold sentence and the best negatives of the
  pipeline's hybrid first stage);
* :mod:`.teacher`: the teacher's scores of every list, computed once, in shards (resumable),
  in a folder keyed by the teacher, the first stage and the settings (:mod:`.cache`);
* :mod:`.datamodule`: training batches of each question's gold pair, its list and the
  teacher's scores, for :class:`~retrieval_qa.models.distill.DistillDualEncoderModule`.

Run ``rqa prepare experiment=distill profile=cpu``, then
``rqa train experiment=distill profile=cpu``.
"""
