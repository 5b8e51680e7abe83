"""Planning and running lists of steps: the one runner (:mod:`.runner`: finished steps
skipped, interrupted ones resumed, a deadline obeyed, one record per step) and its planners
here: a sweep of ``rqa train`` runs from a wandb sweep file (``rqa sweep FILE``: its plan,
:mod:`.plan`, its running, :mod:`.run`, and its comparison table, ``rqa analyze side-by-side
--sweep DIR``: :mod:`.table`) and a queue file of ``rqa`` runs (:mod:`.queue`,
``experiments/run_queue.py``); the device checklist (``experiments/device_check.py``) plans
over the same runner. :mod:`.experiments` says which experiments of conf/ a planner runs. It
sits above :mod:`retrieval_qa.training` and :mod:`retrieval_qa.analysis` (the table's
statistics and the sweep folders' reader, :mod:`retrieval_qa.analysis.sweep_runs`, which
``rqa compare`` reads too); the command line and experiments/ import it."""
