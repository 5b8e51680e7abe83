"""Speed and memory of retrieval-qa against peers run side by side, one bench a module.

Run a bench from the repository root as a module: ``python -m bench.bench_training``,
``python -m bench.bench_encoding``, ... (each module's docstring gives its options and the
command of its committed result). What the benches share is in :mod:`bench.common`.
"""
