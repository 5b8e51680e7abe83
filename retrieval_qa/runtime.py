"""Process-wide runtime settings applied by every command: the number of torch threads.

On a 2-core laptop with another process busy on one core, torch's default (one intra-op
thread per core) makes every parallel op wait for the descheduled thread: a CPU profile ran
at 0.05 steps/s instead of 1.5 (results/BENCH.md). ``threads`` comes from, in order: the
command line (``rqa --threads N`` or ``threads=N`` for train/export), ``$RQA_THREADS``, then
``threads`` in conf/train.yaml. ``auto`` is half the usable cores (at least 1, at most 8)."""

from __future__ import annotations

import logging
import os

log = logging.getLogger(__name__)
MAX_AUTO_THREADS = 8


def usable_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def resolve_threads(value: int | str | None = None) -> int:
    """The thread count for ``value``; a value that is not a positive integer or ``auto`` is
    an error.

    Args:
        value: an int, ``"auto"`` (half the usable cores, at most :data:`MAX_AUTO_THREADS`), or
            None / "": $RQA_THREADS, then the ``threads`` of conf/train.yaml.
    """
    from .config import threads_setting

    setting = threads_setting(value)  # checked; None: conf/train.yaml's
    if setting == "auto":
        return max(1, min(MAX_AUTO_THREADS, usable_cores() // 2))
    return int(setting)


def apply_threads(value: int | str | None = None) -> int:
    """Set torch's intra-op threads (and inter-op, when still possible); returns the count.

    Args:
        value: as :func:`resolve_threads`.
    """
    n = resolve_threads(value)
    import torch

    torch.set_num_threads(n)
    try:
        torch.set_num_interop_threads(n)
    except RuntimeError:  # already set, or parallel work has started: intra-op is what matters
        pass
    return n


def machine_info(threads: int, packages: tuple[str, ...] = ()) -> dict:
    """What a benchmark, study or training ran on, for its JSON: the device (the GPU's name
    when torch sees one, else ``cpu: <model>``), the CPU model (from
    /proc/cpuinfo, "unknown" elsewhere) and the instruction set torch's kernels use on it (AVX2,
    AVX512: another one sums in another order, so the same training on two machines agrees only
    within floating-point error), cores, torch threads, the torch and Python versions, each of
    ``packages``' ``__version__`` (module names) and the load average at the start.

    Args:
        threads: the torch threads used.
        packages: module names whose ``__version__`` to record.
    """
    import importlib
    import platform

    import torch

    cpu = "unknown"
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next((line.split(":", 1)[1].strip() for line in f
                        if line.startswith("model name")), cpu)
    except OSError:
        pass
    device = torch.cuda.get_device_name(0) if torch.cuda.is_available() else f"cpu: {cpu}"
    info = {"device": device, "cpu": cpu,
            "cpu_capability": torch.backends.cpu.get_cpu_capability(),
            "cores": os.cpu_count(), "torch_threads": threads, "torch": torch.__version__}
    info.update({name: importlib.import_module(name).__version__ for name in packages})
    return {**info, "python": platform.python_version(), "platform": platform.platform(),
            "load_avg_start": os.getloadavg()}


def run_rqa(args, cwd=None) -> dict:
    """``rqa ARGS`` in a subprocess of this interpreter (from ``cwd``); its JSON, the last line
    of stdout. The command is echoed on stderr; a failure raises with that last line.

    Args:
        args: the command's arguments (after ``rqa``); each is made a string.
        cwd: the working folder; None: this process's.
    """
    import json
    import shlex
    import subprocess
    import sys

    args = [str(a) for a in args]
    print("$ rqa " + " ".join(shlex.quote(a) for a in args), file=sys.stderr, flush=True)
    proc = subprocess.run([sys.executable, "-m", "retrieval_qa.cli", *args],
                          stdout=subprocess.PIPE, text=True, cwd=cwd)
    lines = proc.stdout.strip().splitlines()
    if proc.returncode != 0:
        detail = f": {lines[-1]}" if lines else ""
        raise RuntimeError(f"rqa {' '.join(args)} failed with exit code {proc.returncode}"
                           f"{detail}")
    return json.loads(lines[-1])
