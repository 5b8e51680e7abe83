"""Device, precision, timing and GPU utilisation for the side-by-side benches (training and
encoding against sentence-transformers): what both need to run on a CPU or a CUDA GPU.

* ``--device cpu|cuda`` (default: cuda when torch sees a GPU, else cpu) and ``--precision
  32|bf16-mixed|16-mixed`` (default: bf16-mixed on cuda, 32 on cpu; Lightning's names).
* :func:`autocast`: the autocast context of a precision (none for 32), what Lightning's
  mixed-precision plugin and the Hugging Face trainer (``bf16=True`` / ``fp16=True``) use.
* :func:`synchronize`: waits for the GPU's queued work; a timed region on CUDA starts and ends
  with it (CUDA calls return before the work is done). A no-op on the CPU.
* :class:`Utilisation`: NVML's ``utilization.gpu`` (the percentage of time in which at least
  one kernel ran on the GPU) sampled in a background thread about every 100 ms, each sample
  credited to the side whose timed region is open; mean and median per side. From a
  streaming ``nvidia-smi --query-gpu=utilization.gpu -lms N``, else ``torch.cuda.utilization``
  (pynvml); on the CPU, or with neither, every side's figure is None and ``reason`` says why.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import statistics
import subprocess
import threading
import time
from collections.abc import Callable

import torch

PRECISIONS = ("32", "bf16-mixed", "16-mixed")
AUTOCAST_DTYPES = {"bf16-mixed": torch.bfloat16, "16-mixed": torch.float16}


def add_device_args(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--device", choices=("cpu", "cuda"), default=None,
                    help="where both sides run (default: cuda when available, else cpu)")
    ap.add_argument("--precision", choices=PRECISIONS, default=None,
                    help="both sides: 32, or autocast to bf16 / fp16 with fp32 weights "
                         "(default: bf16-mixed on cuda, 32 on cpu)")


def resolve_device(device: str | None, precision: str | None) -> tuple[torch.device, str]:
    """The device and precision of ``--device`` / ``--precision`` with their defaults; a
    request the machine cannot run is a clear error."""
    name = device or ("cuda" if torch.cuda.is_available() else "cpu")
    if name == "cuda" and not torch.cuda.is_available():
        raise SystemExit("--device cuda: torch sees no CUDA GPU here (torch "
                         f"{torch.__version__}); run with --device cpu")
    precision = precision or ("bf16-mixed" if name == "cuda" else "32")
    if precision not in PRECISIONS:
        raise SystemExit(f"--precision {precision}: expected one of {', '.join(PRECISIONS)}")
    if precision == "16-mixed" and name == "cpu":
        raise SystemExit("--precision 16-mixed needs --device cuda (CPU autocast is bf16: use "
                         "--precision bf16-mixed or 32)")
    return torch.device(name), precision


def autocast(device: torch.device, precision: str):
    """The autocast context of ``precision`` on ``device`` (a null context for 32)."""
    if precision == "32":
        return contextlib.nullcontext()
    return torch.autocast(device_type=device.type, dtype=AUTOCAST_DTYPES[precision])


def grad_scaler(device: torch.device, precision: str):
    """A loss scaler for fp16 autocast (what Lightning's 16-mixed and the HF trainer's fp16
    use), else None."""
    if precision != "16-mixed":
        return None
    return torch.amp.GradScaler(device.type)


def move(batch, device: torch.device):
    """``batch`` (tensors in dicts, lists and tuples; other values kept) on ``device``: what
    Lightning's and the Hugging Face trainer's input preparation do before a step."""
    if torch.is_tensor(batch):
        return batch.to(device)
    if isinstance(batch, dict):
        return {k: move(v, device) for k, v in batch.items()}
    if isinstance(batch, (list, tuple)):
        return type(batch)(move(v, device) for v in batch)
    return batch


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def device_info(device: torch.device, precision: str, cpu_name: str) -> dict:
    """What the sides ran on, for the JSON: the GPU's name (``torch.cuda.get_device_name``),
    its compute capability, memory and the CUDA version torch was built with; the CPU's model
    on the CPU."""
    info = {"type": device.type, "precision": precision}
    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        info.update(name=torch.cuda.get_device_name(device),
                    capability=".".join(map(str, torch.cuda.get_device_capability(device))),
                    memory_gib=round(props.total_memory / 2**30, 1),
                    cuda=torch.version.cuda, gpu_id=gpu_id(device))
    else:
        info["name"] = cpu_name
    return info


def gpu_id(device: torch.device) -> str | None:
    """How ``nvidia-smi -i`` names the GPU behind ``device``: its UUID when torch reports it
    (right under any ``CUDA_VISIBLE_DEVICES``), else the visible device's entry, else the
    index; None on the CPU."""
    if device.type != "cuda":
        return None
    index = device.index if device.index is not None else torch.cuda.current_device()
    uuid = getattr(torch.cuda.get_device_properties(index), "uuid", None)
    if uuid is not None:
        text = str(uuid)
        return text if text.startswith(("GPU-", "MIG-")) else f"GPU-{text}"
    visible = [v.strip() for v in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",")
               if v.strip()]
    return visible[index] if index < len(visible) else str(index)


def _torch_poll(device_index: int) -> Callable[[], float]:
    return lambda: float(torch.cuda.utilization(device_index))


class Utilisation:
    """GPU utilisation per timed region, sampled in a background thread (see the module
    docstring). ``gpu``: the ``nvidia-smi -i`` name of the GPU (:func:`gpu_id`), None on the
    CPU (nothing is sampled). ``poll``: the fallback when ``nvidia-smi`` is not on PATH, a
    function returning one reading (default ``torch.cuda.utilization``). Use as a context
    manager around the run, and :meth:`region` (or :meth:`begin` / :meth:`end`) around each
    side's timed work; :meth:`summary` gives a side's figures or None."""

    def __init__(self, gpu: str | None, interval_s: float = 0.1,
                 nvidia_smi: str = "nvidia-smi",
                 poll: Callable[[], float] | None = None) -> None:
        self.gpu, self.interval_s = gpu, interval_s
        self.nvidia_smi, self.poll = nvidia_smi, poll
        self.samples: dict[str, list[float]] = {}
        self.source: str | None = None
        self.reason: str | None = "device cpu: no GPU to sample" if gpu is None else None
        self._label: str | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._proc: subprocess.Popen | None = None

    # ---- the sampling thread ------------------------------------------------------------
    def __enter__(self) -> Utilisation:
        if self.gpu is None:
            return self
        smi = shutil.which(self.nvidia_smi)
        if smi is not None:
            try:
                self._proc = subprocess.Popen(
                    [smi, "--query-gpu=utilization.gpu", "--format=csv,noheader,nounits",
                     "-i", self.gpu, "-lms", str(max(1, round(self.interval_s * 1000)))],
                    stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
            except OSError as e:
                self.reason = f"{smi} did not start: {e}"
            else:
                self.source = f"nvidia-smi --query-gpu=utilization.gpu -lms (every " \
                              f"{self.interval_s * 1000:.0f} ms)"
                self._thread = threading.Thread(target=self._read_stream, daemon=True)
                self._thread.start()
                return self
        poll = self.poll
        if poll is None and self.gpu.isdigit():
            poll = _torch_poll(int(self.gpu))
        if poll is None:
            self.reason = "no nvidia-smi on PATH and no device index for torch.cuda.utilization"
            return self
        try:
            poll()
        except Exception as e:  # pynvml missing, NVML not answering: no figure, not a crash
            self.reason = (f"no {self.nvidia_smi} on PATH, and torch.cuda.utilization failed: "
                           f"{type(e).__name__}: {e}")
            return self
        self.source = f"torch.cuda.utilization (every {self.interval_s * 1000:.0f} ms)"
        self._thread = threading.Thread(target=self._poll_loop, args=(poll,), daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        if self._proc is not None:
            self._proc.terminate()
            try:
                self._proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def _record(self, value: float) -> None:
        label = self._label
        if label is not None:
            self.samples.setdefault(label, []).append(value)

    def _read_stream(self) -> None:
        for line in self._proc.stdout:
            try:
                value = float(line.strip())
            except ValueError:  # "[N/A]", a header, a warning: not a reading
                continue
            self._record(value)
        if not self.samples and self.reason is None:
            self.reason = f"{self.nvidia_smi} gave no readings"

    def _poll_loop(self, poll: Callable[[], float]) -> None:
        while not self._stop.is_set():
            try:
                self._record(float(poll()))
            except Exception as e:
                self.reason = f"torch.cuda.utilization failed: {type(e).__name__}: {e}"
                return
            self._stop.wait(self.interval_s)

    # ---- regions and figures ------------------------------------------------------------
    def begin(self, label: str) -> None:
        self._label = label

    def end(self) -> None:
        self._label = None

    @contextlib.contextmanager
    def region(self, label: str):
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
        """Every side's :meth:`summary` and, when a figure is missing, why."""
        out = {label: self.summary(label) for label in labels}
        if any(v is None for v in out.values()):
            out["missing_because"] = self.reason or "no sample fell inside the timed region " \
                                                    "(shorter than one sampling interval)"
        return out


def timer(device: torch.device):
    """A wall-clock reading taken after the device's queued work is done."""
    synchronize(device)
    return time.perf_counter()
