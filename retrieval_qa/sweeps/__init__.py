"""A sweep of ``rqa train`` runs from a wandb sweep file (``rqa sweep FILE``): its plan (the
file checked, the runs proposed and composed: :mod:`.plan`), its running (:mod:`.run`) and
its comparison table (``rqa analyze side-by-side --sweep DIR``: :mod:`.table`). It sits above
:mod:`retrieval_qa.training` and :mod:`retrieval_qa.analysis` (the table's statistics and the
sweep folders' reader, :mod:`retrieval_qa.analysis.sweep_runs`, which ``rqa compare`` reads
too); only the command line imports it."""
