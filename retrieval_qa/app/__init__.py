"""The application layer beside the CLI: workflows that compose configs and call
:func:`retrieval_qa.training.run.train` (a sweep's planning in :mod:`.sweep_plan`, its
running in :mod:`.sweep_run`). Nothing below this layer imports it."""
