"""ENDX Figure 3: question-question similarity matrices for questions sharing one answer.

For one answer sentence with several questions:

(a) ENDX cross-embeddings: each question paired with that answer through the trained
    Cross-Encoder of an ENDX Lightning checkpoint (``R^cross_q``, the question refined by the
    answer);
(b) ENDX dual-embeddings: the question tower of the same ENDX model;
(c) baseline dual-embeddings: the question tower of a plain dual encoder.

Similarity = each side's retrieval score, the inner product of GAM's kernel (eq. 10) on the
embeddings mapped as the ENDX model maps them for GAM in training
(:meth:`~retrieval_qa.losses.InBatchSoftmaxLoss.score_space`): the cross side with the
cross-encoder's loss settings (``cross_loss``), both dual sides with the ENDX model's dual
loss settings (the baseline is meant to be the same family's plain dual encoder, trained with
the same loss). The matrices are symmetrised exactly (``(S + S^T) / 2``, a float-rounding
fix). Besides the heatmaps (``figure3.png``), ``figure3.json`` holds the matrices, GAM's
neighbour distributions ``p(q_j | q_i)`` (the model's kernel and self-pair convention) and two
numbers per dual model: the q|q KL divergence from the cross-side distribution (GAM's
``L_q|q`` on these questions) and the correlation of its off-diagonal similarities with the
cross ones.
"""

from __future__ import annotations

import time
from pathlib import Path

import torch

from ..data.collate import encode_texts
from ..data.types import RetrievalPool
from ..written import read_report
from .common import (
    DEFAULT_OUTPUT_DIR,
    output_name,
    pick_answer,
    pyplot,
    write_json,
)

PANELS = (("cross_endx", "(a) Cross-embeddings (ENDX)"),
          ("dual_endx", "(b) Dual-embeddings (ENDX)"),
          ("dual_baseline", "(c) Dual-embeddings (baseline)"))


def resolve_run(run_dir: str | Path) -> tuple[str, str]:
    """An ``rqa train`` run folder -> (Lightning checkpoint with the cross-encoder, exported
    towers folder), from its ``result.json`` (falling back to ``checkpoints/last.ckpt``).

    Args:
        run_dir: the finished ENDX run's folder.
    """
    run = Path(run_dir)
    result = run / "result.json"
    if not result.is_file():
        raise FileNotFoundError(f"{result} not found: is {run} a finished `rqa train` run?")
    report = read_report(result)
    ckpt = report.get("best_training_checkpoint")
    candidates = [Path(ckpt), run / "checkpoints" / Path(ckpt).name] if ckpt else []
    candidates.append(run / "checkpoints" / "last.ckpt")
    found = next((p for p in candidates if p.is_file()), None)
    if found is None:
        raise FileNotFoundError(f"no training checkpoint for {run} (looked at "
                                f"{[str(p) for p in candidates]})")
    model = Path(report.get("checkpoint") or run / "model")
    if not (model / "model.json").is_file():
        model = run / "model"
    return str(found), str(model)


def similarity_matrix(emb: torch.Tensor) -> torch.Tensor:
    """The inner products ``[N, N]`` of the rows of ``emb``, in float64, symmetrised exactly.

    Args:
        emb: embeddings ``[N, D]`` (already in the score space).

    Example:

        >>> similarity_matrix(torch.tensor([[1.0, 0.0], [1.0, 1.0]]))
        tensor([[1., 1.],
                [1., 2.]], dtype=torch.float64)
    """
    s = emb.double() @ emb.double().T
    return (s + s.T) / 2


def _offdiag(m: torch.Tensor) -> torch.Tensor:
    return m[~torch.eye(len(m), dtype=torch.bool)]


def _correlation(a: torch.Tensor, b: torch.Tensor) -> float | None:
    x, y = _offdiag(a), _offdiag(b)
    x, y = x - x.mean(), y - y.mean()
    den = (x.norm() * y.norm()).item()
    return None if den == 0 else round((x @ y).item() / den, 4)


@torch.inference_mode()
def cross_embeddings(module, tokenizer, questions: list[str], answer, meta: dict) -> torch.Tensor:
    """``R^cross_q`` of every question paired with ``answer`` (a Candidate).

    Args:
        module: the ENDX module (its ``cross_branch``).
        tokenizer: the ENDX export's tokenizer.
        questions: the questions.
        answer: the shared answer sentence (with its context when the model reads it).
        meta: the ENDX export's meta (``max_question_length``, ``max_answer_length``,
            ``answer_with_context``).
    """
    contexts = [answer.context] * len(questions) if meta.get("answer_with_context") else None
    q = encode_texts(tokenizer, questions, meta["max_question_length"])
    a = encode_texts(tokenizer, [answer.text] * len(questions), meta["max_answer_length"],
                     contexts)
    r_q, _ = module.cross_branch(q, a)
    return r_q.float()


def similarity_analysis(pool: RetrievalPool, *, endx_checkpoint: str | Path,
                        endx_model: str | Path, dual_model: str | Path,
                        answer: str | None = None, max_questions: int = 10,
                        output_dir: str | Path = DEFAULT_OUTPUT_DIR, tag: str | None = None
                        ) -> dict:
    """Figure 3 (see the module docstring): writes ``figure3[_TAG].{png,json}``.

    Args:
        pool: the pool the answer and its questions come from.
        endx_checkpoint: the ENDX Lightning checkpoint (with the cross branch).
        endx_model: the ENDX run's exported towers.
        dual_model: the baseline dual encoder's export.
        answer: a candidate id or sentence text; None: the sentence with the most questions
            (:func:`~.common.pick_answer`).
        max_questions: the most questions shown.
        output_dir: where the figure is written.
        tag: added to the files' names; None: none.
    """
    from ..losses.gam import log_neighbour_probabilities, relation_kl
    from ..models.artifact import load_artifact
    from ..models.endx import EndxModule

    start = time.perf_counter()
    out = Path(output_dir)
    candidate, questions = pick_answer(pool, answer, max_questions)
    endx_inf = load_artifact(endx_model)
    dual_inf = load_artifact(dual_model)
    module = EndxModule.load_from_checkpoint(str(endx_checkpoint), map_location="cpu").eval()
    gam = module.hparams["gam"]
    kernel, sigma = gam["kernel"], float(gam["sigma"])
    exclude_self = bool(gam.get("exclude_self", False))
    kw = {"kernel": kernel, "sigma": sigma, "exclude_self": exclude_self}
    cross = cross_embeddings(module, endx_inf.tokenizer, questions, candidate, endx_inf.meta)
    dual_space = module.loss.score_space
    emb = {"cross_endx": module.cross_loss.score_space(cross),
           "dual_endx": dual_space(endx_inf.encode_questions(questions, progress=False)),
           "dual_baseline": dual_space(dual_inf.encode_questions(questions, progress=False))}
    matrices = {k: similarity_matrix(v) for k, v in emb.items()}
    probs = {k: log_neighbour_probabilities(v, v, **kw).exp()
             for k, v in emb.items()}
    agreement = {k: {"kl_qq_from_cross": round(float(relation_kl(
                        emb["cross_endx"], emb["cross_endx"], emb[k], emb[k], **kw)), 6),
                     "offdiag_correlation_with_cross": _correlation(matrices["cross_endx"],
                                                                    matrices[k])}
                 for k in ("dual_endx", "dual_baseline")}
    stem = output_name("figure3", tag)
    scores = {"cross_endx": _score_name(module.cross_loss), "dual_endx": _score_name(module.loss),
              "dual_baseline": _score_name(module.loss)}
    png = _figure3(matrices, out / f"{stem}.png", candidate.text, scores)
    data = {"answer": {"id": candidate.id, "text": candidate.text, "doc_id": candidate.doc_id},
            "questions": questions, "dataset": pool.dataset, "pool": pool.pool,
            "similarity": {"cross": _score_name(module.cross_loss),
                           "dual": _score_name(module.loss)},
            "gam_kernel": kernel, "gam_sigma": sigma, "gam_exclude_self": exclude_self,
            "models": {"endx_checkpoint": str(endx_checkpoint), "endx_model": str(endx_model),
                       "dual_model": str(dual_model)},
            "matrices": {k: [[round(x, 6) for x in row] for row in m.tolist()]
                         for k, m in matrices.items()},
            "neighbour_probabilities": {k: [[round(x, 6) for x in row] for row in p.tolist()]
                                        for k, p in probs.items()},
            "agreement_with_cross": agreement,
            "mean_offdiag_similarity": {k: round(_offdiag(m).mean().item(), 6)
                                        for k, m in matrices.items()}}
    js = write_json(out / f"{stem}.json", data)
    return {"analysis": "similarity", "answer": candidate.id, "questions": len(questions),
            "agreement_with_cross": agreement, "files": [png, js],
            "seconds": round(time.perf_counter() - start, 3)}


def _score_name(loss) -> str:
    return f"{loss.scale:g} x " + ("cosine" if loss.similarity == "cosine" else "inner product")


def _figure3(matrices: dict[str, torch.Tensor], path: Path, answer_text: str,
             scores: dict[str, str]) -> str:
    """The heatmaps, each axis the questions Q1..Qn, each colourbar the score it shows."""
    plt = pyplot()
    n = len(next(iter(matrices.values())))
    fig, axes = plt.subplots(1, len(PANELS), figsize=(4.4 * len(PANELS), 4.2))
    labels = [f"Q{i + 1}" for i in range(n)]
    for ax, (key, title) in zip(axes, PANELS, strict=True):
        im = ax.imshow(matrices[key].numpy(), cmap="viridis")
        ax.set_title(title, fontsize=10)
        ax.set_xticks(range(n), labels, fontsize=7)
        ax.set_yticks(range(n), labels, fontsize=7)
        ax.set_xlabel("question", fontsize=8)
        ax.set_ylabel("question", fontsize=8)
        bar = fig.colorbar(im, ax=ax, fraction=0.046, pad=0.04)
        bar.set_label(f"similarity ({scores[key]})", fontsize=8)
    short = answer_text if len(answer_text) <= 110 else answer_text[:107] + "..."
    fig.suptitle(f"Question-question similarities; answer: {short}", fontsize=9)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return str(path)
