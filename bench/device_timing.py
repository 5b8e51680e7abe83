"""Device, precision, timing and GPU utilisation for the side-by-side benches (training and
encoding against sentence-transformers): what both need to run on a CPU or a CUDA GPU.

* ``--device cpu|cuda`` (default: cuda when torch sees a GPU, else cpu) and ``--precision
  32|bf16-mixed|16-mixed`` (default: bf16-mixed on cuda, 32 on cpu; Lightning's names).
* :func:`autocast`: the autocast context of a precision (none for 32), what Lightning's
  mixed-precision plugin and the Hugging Face trainer (``bf16=True`` / ``fp16=True``) use.
* :func:`synchronize`: waits for the GPU's queued work; a timed region on CUDA starts and ends
  with it (CUDA calls return before the work is done). A no-op on the CPU.
* :class:`Utilisation`: NVML's ``utilization.gpu`` (the percentage of time in which at least
  one kernel ran on the GPU; ``sm`` in ``nvidia-smi dmon``) sampled in a background thread
  about every 100 ms, each reading credited to the side whose timed region is open; mean and
  median per side. From ``torch.cuda.utilization`` (pynvml, in-process), else one
  ``nvidia-smi --query-gpu=utilization.gpu`` per reading; on the CPU, or with neither, every
  side's figure is None and ``reason`` says why.
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
from collections.abc import Callable, Mapping

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
    if isinstance(batch, Mapping):  # dicts and Hugging Face's BatchEncoding (a UserDict)
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
