"""What the side-by-side benches report beside their rates, and what each figure measures.

* Rounds: a bench times several rounds a side; the first ``warm-up`` rounds are reported
  but left out, and the figure is the median of the warm rounds (:func:`rounds_summary`).
* Model FLOPs of a training step of a BERT-style encoder pair (:func:`training_flops`): for
  each text of ``n`` real (non-padding) tokens, forward ``2 * P * n`` for the layers'
  matrices (``P = L * (4 d^2 + 2 d i)`` weights: Q, K, V, output and the two feed-forward
  matrices of each of the ``L`` layers, width ``d``, feed-forward width ``i``) plus
  ``4 * L * d * n^2`` for attention (the scores and their use); the in-batch scores of a
  batch of ``B`` pairs ``2 * B^2 * d``; a training step is 3 times its forward (the backward
  twice). Padding, embeddings, layer norms, softmax and the optimiser are not counted: these
  are the FLOPs the model needs, the same on both sides for the same texts.
* Achieved TFLOP/s = model FLOPs per step x steps/s; MFU (model-FLOPs utilisation) = that /
  the device's peak dense bf16 tensor-core FLOP/s (:data:`PEAK_BF16_DENSE_TFLOPS`, from the
  vendors' data sheets; whichever precision the run used).
* :data:`GPU_BUSY`: what NVML's ``utilization.gpu`` is (:mod:`bench.gpu_utilisation`): the
  share of sampling periods in which any kernel ran, not how full the SMs were; a GPU can be
  "100 % busy" at a few % of MFU.
"""

from __future__ import annotations

import statistics

#: peak dense bf16 tensor-core TFLOP/s (no sparsity), by the name torch reports
#: (``torch.cuda.get_device_name``); the first key found in the name wins
PEAK_BF16_DENSE_TFLOPS = {
    "H200 NVL": 835.0,
    "H200": 989.0,                 # H200 SXM
    "H100 NVL": 835.0,
    "H100 PCIe": 756.0,
    "H100": 989.0,                 # H100 SXM5 (torch: "NVIDIA H100 80GB HBM3")
    "GH200": 989.0,
    "A100": 312.0,                 # SXM and PCIe
    "L40S": 362.0,
    "L4": 121.0,
}
GPU_BUSY = ("NVML utilization.gpu: the share of sampling periods in which at least one kernel "
            "ran on the GPU; not how many SMs were busy (see achieved TFLOP/s and MFU)")
FLOPS_FORMULA = ("per step: 3 x forward; forward per text of n real tokens 2*P*n + 4*L*d*n^2 "
                 "(P = L*(4*d^2 + 2*d*i)), plus 2*B^2*d for the in-batch scores; padding, "
                 "embeddings, norms, softmax and the optimiser not counted")


def peak_tflops(device_name: str | None) -> tuple[float | None, str]:
    """(the peak dense bf16 TFLOP/s of the device named, the table's key) or (None, why)."""
    if not device_name:
        return None, "no device name"
    for key, value in PEAK_BF16_DENSE_TFLOPS.items():
        if key in device_name:
            return value, key
    return None, f"{device_name!r} is not in bench/measures.py's table of peaks"


def layer_weights(config) -> tuple[int, int, int]:
    """(L, d, P): layers, width and matrix weights of a BERT-style config."""
    layers, d = config.num_hidden_layers, config.hidden_size
    inner = getattr(config, "intermediate_size", 4 * d)
    return layers, d, layers * (4 * d * d + 2 * d * inner)


def training_flops(config, real: float, real_sq: float, batch: int, steps: int = 1) -> float:
    """Model FLOPs of ``steps`` training steps (module docstring) whose texts hold ``real``
    real tokens and ``real_sq`` as the sum of each text's length squared, in batches of
    ``batch`` pairs."""
    layers, d, weights = layer_weights(config)
    forward = 2 * weights * real + 4 * layers * d * real_sq + steps * 2 * batch * batch * d
    return 3.0 * forward


def utilisation(flops_per_step: float, steps_per_s: float, device_name: str | None) -> dict:
    """Achieved TFLOP/s and MFU (None on a device without a known peak, and why)."""
    achieved = flops_per_step * steps_per_s / 1e12
    peak, key = peak_tflops(device_name)
    return {"model_tflop_per_step": flops_per_step / 1e12, "achieved_tflops": achieved,
            "peak_bf16_dense_tflops": peak, "peak_of": key if peak else None,
            "mfu": achieved / peak if peak else None,
            **({} if peak else {"mfu_missing_because": key})}


def round_bounds(warmup: int, steps: int, rounds: int) -> list[int]:
    """The global steps at which each timed round ends, after ``warmup`` steps (the first
    entry: where the first round starts)."""
    rounds = max(1, min(rounds, steps))
    return [warmup + round(steps * k / rounds) for k in range(rounds + 1)]


def rounds_summary(seconds: dict[str, list[float]], work: list[float], warmup_rounds: int,
                   ours: str = "ours", st: str = "sentence_transformers") -> dict:
    """Every round of both sides and the figure: ``seconds[side][k]`` the time of round k,
    ``work[k]`` what it did (steps, texts); rates = work / seconds; the ratio of a round =
    ST's time / ours (the same work); the figure = the median of the warm rounds' (those after
    ``warmup_rounds``) rates and ratios."""
    rows = []
    for k, amount in enumerate(work):
        o, s = seconds[ours][k], seconds[st][k]
        rows.append({"round": k + 1, "warm_up": k < warmup_rounds, "work": amount,
                     f"{ours}_seconds": o, f"{st}_seconds": s, f"{ours}_rate": amount / o,
                     f"{st}_rate": amount / s, "ratio_ours_over_st": s / o})
    warm = [r for r in rows if not r["warm_up"]] or rows
    return {"rounds": rows,
            "figure": f"median of the {len(warm)} warm round(s) (rounds after "
                      f"{warmup_rounds} warm-up round(s), which are reported, not counted)",
            f"{ours}_rate": statistics.median(r[f"{ours}_rate"] for r in warm),
            f"{st}_rate": statistics.median(r[f"{st}_rate"] for r in warm),
            "ratio_ours_over_st": statistics.median(r["ratio_ours_over_st"] for r in warm),
            "ratio_per_round": [round(r["ratio_ours_over_st"], 4) for r in rows]}
