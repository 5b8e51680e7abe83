"""Mining throughput: pairs scored per second by the miner's scoring loop against a plain
``transformers`` forward loop over the same pairs, side by side.

Both sides score the same (question, sentence, context) triples with the same classifier
weights (a :class:`~retrieval_qa.mining.classifier.MiningClassifier` initialised from the
packaged all-MiniLM-L6-v2; an untrained head scores as fast as a trained one), the same
maximum length, the same batch size and the same torch threads. The triples are what the miner
scores: for a seeded sample of questions of the MultiReQA SQuAD test pool, their top
``--top-k`` sentences by a BM25 index of the pool, with each sentence's paragraph as context.

* ours: :class:`~retrieval_qa.mining.scorer.ClassifierScorer` called as the miner calls it,
  ``--chunk`` pairs at a time (tokenised at once, run longest first, each batch cut to its
  longest row, ``torch.inference_mode``);
* plain: the straightforward loop, pairs in the given order, ``--batch-size`` at a time:
  ``tokenizer(questions, answer + " [SEP] " + context, truncation="only_second",
  padding=True)`` then ``AutoModel`` forward, the same head on [CLS], sigmoid, under
  ``torch.inference_mode``.

To score the same function the bench uses ``context_segment=1`` (a plain tokenizer's pair
encoding gives the whole second segment id 1) and no separate question cap; the max
absolute difference of the two sides' probabilities is reported (it shows they agree).
Rounds alternate the order of the sides (ABBA) after an untimed warm-up.

Usage: HF_HUB_OFFLINE=1 python -m bench.bench_mining [--questions 64] [--top-k 10]
       [--max-length 128] [--batch-size 32] [--chunk 256] [--rounds 2] [--threads 1]
       [--out results/bench_mining.json]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import time

import torch

from bench.common import RESULTS, add_threads_arg, machine, write_json

os.environ.setdefault("TOKENIZERS_PARALLELISM", "true")


def triples(questions: int, top_k: int, seed: int) -> tuple[list[str], list[str], list[str]]:
    """The miner's kind of pairs: BM25 top-k sentences of sampled test questions."""
    from retrieval_qa.data import load_pool
    from retrieval_qa.data.pool_index import known_positives
    from retrieval_qa.mining.neighbours import bm25_neighbours

    pool, _ = load_pool("multireqa_squad", "test")
    rows = sorted(random.Random(seed).sample(range(len(pool.questions)), questions))
    positives = known_positives(pool)
    found = bm25_neighbours(pool, positives, top_k)
    q, a, c = [], [], []
    for i in rows:
        for j, _ in found[i]:
            q.append(pool.questions[i])
            a.append(pool.candidates[j].text)
            c.append(pool.candidates[j].context)
    return q, a, c


class Ours:
    name = "ours (miner scoring loop)"

    def __init__(self, model, batch_size: int, chunk: int) -> None:
        from retrieval_qa.mining.scorer import ClassifierScorer

        self.scorer = ClassifierScorer(model, batch_size)
        self.chunk = chunk

    def score(self, q, a, c) -> torch.Tensor:
        parts = [self.scorer(q[lo:lo + self.chunk], a[lo:lo + self.chunk], c[lo:lo + self.chunk])
                 for lo in range(0, len(q), self.chunk)]
        return torch.cat(parts)


class Plain:
    name = "plain transformers loop"

    def __init__(self, model, batch_size: int, max_length: int) -> None:
        self.encoder, self.head, self.tokenizer = model.encoder, model.head, model.tokenizer
        self.batch_size, self.max_length = batch_size, max_length

    @torch.inference_mode()
    def score(self, q, a, c) -> torch.Tensor:
        out = []
        for lo in range(0, len(q), self.batch_size):
            second = [f"{x} [SEP] {y}" for x, y in zip(a[lo:lo + self.batch_size],
                                                      c[lo:lo + self.batch_size], strict=True)]
            enc = self.tokenizer(q[lo:lo + self.batch_size], second, truncation="only_second",
                                 max_length=self.max_length, padding=True, return_tensors="pt")
            cls = self.encoder(**enc).last_hidden_state[:, 0]
            out.append(torch.sigmoid(self.head(cls).squeeze(-1).float()))
        return torch.cat(out)


def padding(model, q, a, c, batch_size: int, sort: bool) -> dict:
    from retrieval_qa.mining.examples import encode_triples

    enc = encode_triples(model.tokenizer, q, a, c, model.max_length, model.max_question_length,
                         model.context_segment)
    lengths = enc["attention_mask"].sum(dim=1).tolist()
    if sort:
        lengths = sorted(lengths, reverse=True)
    padded = sum(max(lengths[lo:lo + batch_size]) * len(lengths[lo:lo + batch_size])
                 for lo in range(0, len(lengths), batch_size))
    return {"real_tokens": sum(lengths), "padded_tokens": padded}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--questions", type=int, default=64)
    ap.add_argument("--top-k", type=int, default=10)
    ap.add_argument("--max-length", type=int, default=128,
                    help="tokens of question + sentence + context (the CPU profile's)")
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--chunk", type=int, default=256, help="pairs per scorer call (the miner's)")
    ap.add_argument("--rounds", type=int, default=2)
    add_threads_arg(ap)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default=str(RESULTS / "bench_mining.json"))
    args = ap.parse_args()
    torch.set_num_threads(args.threads)

    from retrieval_qa.mining.classifier import MiningClassifier

    wall = time.perf_counter()
    q, a, c = triples(args.questions, args.top_k, args.seed)
    torch.manual_seed(args.seed)
    model = MiningClassifier(
        pretrained="minilm", fallback="minilm", dropout=0.1, max_length=args.max_length,
        max_question_length=args.max_length, with_context=True, context_segment=1,
        score_batch_size=args.batch_size,
        optimizer={"name": "adamw", "lr": 1e-5, "weight_decay": 0.0, "schedule": "constant"},
        pretrained_label=None).eval()
    sides = [Ours(model, args.batch_size, args.chunk),
             Plain(model, args.batch_size, args.max_length)]
    for side in sides:  # warm-up
        side.score(q[:args.batch_size], a[:args.batch_size], c[:args.batch_size])
    times: dict[str, list[float]] = {s.name: [] for s in sides}
    probs: dict[str, torch.Tensor] = {}
    for r in range(args.rounds):
        for side in (sides if r % 2 == 0 else sides[::-1]):
            t = time.perf_counter()
            probs[side.name] = side.score(q, a, c)
            times[side.name].append(time.perf_counter() - t)
    rate = {name: len(q) / statistics.median(t) for name, t in times.items()}
    ours, plain = sides[0].name, sides[1].name
    result = {
        "benchmark": "mining throughput: pairs scored per second",
        "pairs": len(q), "questions": args.questions, "top_k": args.top_k,
        "pairs_from": "BM25 top-k sentences of sampled MultiReQA SQuAD test questions, "
                      "paragraph as context",
        "classifier": f"MiningClassifier over {model.pretrained_label} (untrained head)",
        "max_length": args.max_length, "batch_size": args.batch_size, "chunk": args.chunk,
        "rounds": args.rounds, "seconds": {k: [round(x, 3) for x in v] for k, v in times.items()},
        "pairs_per_second": {k: round(v, 2) for k, v in rate.items()},
        "ratio_ours_over_plain": round(rate[ours] / rate[plain], 3),
        "max_abs_probability_difference": float((probs[ours] - probs[plain]).abs().max()),
        "padding": {ours: padding(model, q, a, c, args.batch_size, sort=True),
                    plain: padding(model, q, a, c, args.batch_size, sort=False)},
        "machine": machine(torch.get_num_threads()),
        "wall_seconds": round(time.perf_counter() - wall, 1),
    }
    write_json(result, args.out)
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
