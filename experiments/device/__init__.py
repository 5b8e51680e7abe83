"""The device checklist's parts (``experiments/device_check.py`` is its command line):

* :mod:`.checklist`: the paths, the item kinds and the checklist file's items;
* :mod:`.commands`: an item's steps, its placeholders filled, shrunk for the CPU rehearsal;
* :mod:`.records`: each item's JSON (its figures), the queue items' finished runs (a queue
  file's plan: retrieval_qa/sweeps/queue.py);
* :mod:`.runner`: each item a step of the one runner (retrieval_qa/sweeps/runner.py, which
  runs the items that fit before a deadline): its commands, carry steps and JSON;
* :mod:`.status`: progress, and the bundle a turn brings back;
* :mod:`.carry`: what one turn leaves for the next (weights in bf16 parts, small folders);
* :mod:`.schedule`: Table 2's ``JOBS=N`` time computed from its rows' times;
* ``stage_eval.py``: a training stage's carried weights, tested on the full pool.

The shell scripts beside them (``start.sh``, ``poll.sh``, ``env.sh``) run on the GPU machine
(``docs/reproduce.md``, "A GPU turn").
"""
