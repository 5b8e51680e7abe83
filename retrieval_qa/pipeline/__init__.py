"""Retrieval pipelines as configuration (conf/pipeline/*.yaml): first-stage retrievers (BM25,
BM25 with paragraph context, exported dual encoders), each writing its per-question top-k to
a run file; a fusion of those lists (reciprocal-rank fusion or a convex combination of
normalised scores, weights tuned on the validation side of the training file); an optional
cross-encoder reranker over the fused top-k; all ranked by the one evaluator's rules.

Entry points: :func:`~.run.run_pipeline` (``rqa evaluate --pipeline NAME``) and
:func:`~.composition.load_pipeline`."""
