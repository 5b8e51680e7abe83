"""Classifiers of a concatenated pair ``[CLS] question [SEP] sentence [SEP]``: the models,
their training data and their trainings, each a ``pl.Trainer`` of
:func:`retrieval_qa.training.trainer.build_trainer` that resumes exactly after a crash.

- :mod:`.pair_classifier`: the cross-attention classifier (the ENDX paper's BERTQA, Table 6);
  :mod:`.pair_data`: its batches of gold pairs and sampled negatives;
  :mod:`.train_classifier`: its training (``rqa analyze bertqa``).
- :mod:`.reranker`: the cross-encoder reranker of the pipelines, exported as a
  sentence-transformers ``CrossEncoder`` folder; :mod:`.reranker_data`: its examples (gold
  pairs, BM25 and same-paragraph negatives); :mod:`.train_reranker`: its training
  (``python -m retrieval_qa.classifiers.train_reranker``).

The supervised-mining classifier, a method of ``rqa train`` built on :mod:`.pair_classifier`,
is in :mod:`retrieval_qa.mining` with its examples (:mod:`retrieval_qa.mining.examples`,
:mod:`retrieval_qa.mining.negatives`, :mod:`retrieval_qa.mining.classifier_data`)."""
