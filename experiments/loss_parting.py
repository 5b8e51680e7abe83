"""Where two trainings of the same settings part: their per-step training losses, read from the
``last.ckpt`` of each run folder (the reranker's and the classifiers' ``LossRecorder`` keeps
every step's loss there), compared step by step. Prints, and writes with ``--output``, the first
step whose losses differ in any bit and, per stretch of ``--every`` steps, the largest and the
mean absolute difference: a run rebuilt on the same machine and thread count is bitwise the
same, and one rebuilt where the kernels sum in another order (another CPU, another instruction
set) parts from its first steps by rounding and drifts further with every step.

    python experiments/loss_parting.py runs/diag/default runs/diag/avx2 \\
        --output results/distill/loss_parting_q12k_avx512_avx2.json
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

RECORDER = "LossRecorder"


def step_losses(run: str | Path) -> list[float]:
    """The per-step losses kept in ``run``'s ``checkpoints/last.ckpt`` (``run`` may name the
    checkpoint itself); an error names the file when it holds none."""
    import torch

    path = Path(run)
    if path.is_dir():
        path = path / "checkpoints" / "last.ckpt"
    if not path.is_file():
        raise SystemExit(f"loss_parting: no checkpoint at {path} (fix: give a run folder "
                         "whose training wrote checkpoints/last.ckpt, or the checkpoint file)")
    # mmap: the tensors (weights, optimizer state) stay on disk; only the loss list is read
    callbacks = torch.load(path, map_location="cpu", weights_only=False,
                           mmap=True).get("callbacks", {})
    kept = [v["losses"] for k, v in callbacks.items() if RECORDER in str(k)]
    if not kept:
        raise SystemExit(f"loss_parting: {path} keeps no per-step losses (no {RECORDER} "
                         "state; fix: give a reranker's or classifier's training checkpoint)")
    return [float(x) for x in kept[0]]


def machine(run: str | Path) -> dict | None:
    """The machine ``run``'s training report (``training.json``) records, if it does."""
    report = Path(run) / "training.json"
    return json.loads(report.read_text()).get("machine") if report.is_file() else None


def parting(a: list[float], b: list[float], every: int = 25) -> dict:
    """The steps both runs made, the first (1-based) whose losses differ (None: none), and per
    stretch of ``every`` steps the max and mean absolute difference."""
    n = min(len(a), len(b))
    first = next((i + 1 for i in range(n) if a[i] != b[i]), None)
    stretches = []
    for start in range(0, n, every):
        end = min(start + every, n)
        diff = [abs(x - y) for x, y in zip(a[start:end], b[start:end], strict=True)]
        stretches.append({"steps": [start + 1, end], "max_abs": max(diff),
                          "mean_abs": statistics.fmean(diff)})
    return {"steps_compared": n, "steps": [len(a), len(b)], "first_differing_step": first,
            "stretches": stretches}


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("a", help="a run folder (or its last.ckpt)")
    parser.add_argument("b", help="the other run folder (or its last.ckpt)")
    parser.add_argument("--every", type=int, default=25, help="steps per stretch (25)")
    parser.add_argument("--output", help="write the comparison as JSON here")
    args = parser.parse_args(argv)
    out = {"a": args.a, "b": args.b, "machines": [machine(args.a), machine(args.b)],
           **parting(step_losses(args.a), step_losses(args.b), args.every)}
    print(f"{out['steps_compared']} steps compared; first differing step: "
          f"{out['first_differing_step']}")
    for s in out["stretches"]:
        print(f"  steps {s['steps'][0]}-{s['steps'][1]}: max |diff| {s['max_abs']:.3g}, "
              f"mean {s['mean_abs']:.3g}")
    if args.output:
        Path(args.output).parent.mkdir(parents=True, exist_ok=True)
        Path(args.output).write_text(json.dumps(out, indent=2) + "\n")
    return out


if __name__ == "__main__":
    main()
