"""Analyses of the ENDX paper, section 4.5 onwards, each writing its table (Markdown + JSON)
and figures (PNG) into an output folder (default ``runs/analysis/``; the published ones are
in ``results/endx/``):

* :mod:`.one_to_many`: Table 4 and Figure 2 (metrics on the subsets whose answer sentence has
  at least k questions, k = 1..8);
* :mod:`.ablation`: Table 5 (ENDX without each GAM term: the override sets and the table);
* :mod:`.similarity`: Figure 3 (question-question similarity matrices: ENDX cross-embeddings,
  ENDX dual-embeddings, baseline dual-embeddings);
* :mod:`.bertqa`: Table 6 (a concatenated-input cross-attention classifier vs dual encoders on
  a small sample, with timings);
* :mod:`.tsne`: Figure 4 (t-SNE of several questions sharing one answer, per model);
* :mod:`.runs`: the dual vs ENDX side-by-side table from finished training reports.

``rqa analyze {one-to-many|similarity|bertqa|tsne|ablation|side-by-side}`` runs them
(:mod:`retrieval_qa.cli.analyze`).
"""

from .common import DEFAULT_OUTPUT_DIR

__all__ = ["DEFAULT_OUTPUT_DIR"]
