"""GPU utilisation per timed region for the side-by-side benches: NVML's ``utilization.gpu``
(the percentage of time in which at least one kernel ran on the GPU; ``sm`` in ``nvidia-smi
dmon``, though it is not how full the SMs are: a GPU running one small kernel at a time reads
100 %; the benches report achieved TFLOP/s and MFU beside it, bench/measures.py) sampled in a background thread about every 100 ms, each reading credited to the side
whose timed region is open; mean and median per side. From ``torch.cuda.utilization``
(pynvml, in-process), else one ``nvidia-smi --query-gpu=utilization.gpu`` per reading; on the
CPU, or with neither, every side's figure is None and ``reason`` says why.
"""

from __future__ import annotations

import contextlib
import shutil
import statistics
import subprocess
import threading
from collections.abc import Callable

import torch


def torch_utilisation() -> float:
    """NVML's utilization.gpu of the current CUDA device (pynvml, through torch)."""
    return float(torch.cuda.utilization())


class Utilisation:
    """GPU utilisation per timed region, sampled in a background thread (see the module
    docstring). ``gpu``: the ``nvidia-smi -i`` name of the GPU (:func:`gpu_id`), None on the
    CPU (nothing is sampled). Readings come from ``poll`` (default
    ``torch.cuda.utilization``: NVML in-process, no subprocess), or, when that fails (no
    pynvml), from one ``nvidia-smi --query-gpu=utilization.gpu -i GPU`` per sample. A reading
    is credited to the region open when it was asked for. Use as a context manager around
    the run, and :meth:`region` (or :meth:`begin` / :meth:`end`) around each side's timed
    work; :meth:`summary` gives a side's figures or None, and ``reason`` says why."""

    def __init__(self, gpu: str | None, interval_s: float = 0.1,
                 nvidia_smi: str = "nvidia-smi",
                 poll: Callable[[], float] | None = torch_utilisation) -> None:
        self.gpu, self.interval_s = gpu, interval_s
        self.nvidia_smi, self.poll = nvidia_smi, poll
        self.samples: dict[str, list[float]] = {}
        self.source: str | None = None
        self.reason: str | None = "device cpu: no GPU to sample" if gpu is None else None
        self._label: str | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # ---- the sampling thread ------------------------------------------------------------
    def _smi_reading(self, smi: str) -> float:
        out = subprocess.run([smi, "--query-gpu=utilization.gpu", "--format=csv,noheader,nounits",
                              "-i", self.gpu], capture_output=True, text=True, timeout=10,
                             check=True).stdout
        return float(out.strip().splitlines()[0])

    def _source(self) -> tuple[Callable[[], float] | None, str]:
        """The first source that answers (its reading function and name), or None and why."""
        failures = []
        if self.poll is not None:
            try:
                self.poll()
            except Exception as e:  # pynvml missing, NVML not answering: try nvidia-smi
                failures.append(f"torch.cuda.utilization failed ({type(e).__name__}: {e})")
            else:
                return self.poll, "torch.cuda.utilization (NVML)"
        smi = shutil.which(self.nvidia_smi)
        if smi is None:
            failures.append(f"no {self.nvidia_smi} on PATH")
            return None, "; ".join(failures)
        try:
            self._smi_reading(smi)
        except (OSError, ValueError, IndexError, subprocess.SubprocessError) as e:
            failures.append(f"{smi} gave no reading ({type(e).__name__}: {e})")
            return None, "; ".join(failures)
        return (lambda: self._smi_reading(smi)), f"{smi} --query-gpu=utilization.gpu -i {self.gpu}"

    def __enter__(self) -> Utilisation:
        if self.gpu is None:
            return self
        read, name = self._source()
        if read is None:
            self.reason = name
            return self
        self.source = f"{name}, every {self.interval_s * 1000:.0f} ms"
        self._thread = threading.Thread(target=self._loop, args=(read,), daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=15)

    def _loop(self, read: Callable[[], float]) -> None:
        while not self._stop.is_set():
            label = self._label  # the region open when the reading is asked for
            try:
                value = float(read())
            except Exception as e:
                self.reason = f"{self.source} failed mid-run: {type(e).__name__}: {e}"
                return
            if label is not None:
                self.samples.setdefault(label, []).append(value)
            self._stop.wait(self.interval_s)

    # ---- regions and figures ------------------------------------------------------------
    def begin(self, label: str) -> None:
        self._label = label

    def end(self) -> None:
        self._label = None

    @contextlib.contextmanager
    def region(self, label: str | None):
        self.begin(label)
        try:
            yield
        finally:
            self.end()

    def summary(self, label: str) -> dict | None:
        """Mean and median utilisation (%) of ``label``'s regions, with the sample count and
        source; None when nothing was sampled (on the CPU, or no source: see ``reason``)."""
        values = self.samples.get(label)
        if not values:
            return None
        return {"mean_percent": statistics.fmean(values),
                "median_percent": statistics.median(values), "samples": len(values),
                "source": self.source}

    def report(self, labels) -> dict:
        """Every side's :meth:`summary`, what it measures and, when a figure is missing, why."""
        from bench.measures import GPU_BUSY

        out = {label: self.summary(label) for label in labels}
        out["measures"] = GPU_BUSY
        if any(v is None for v in out.values()):
            out["missing_because"] = self.reason or "no sample fell inside the timed region " \
                                                    "(shorter than one sampling interval)"
        return out
