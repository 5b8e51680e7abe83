"""An item's steps: its command split at ``&&``, its placeholders filled, the prerequisites of
a smoke item added, and everything shrunk for the CPU rehearsal.

Placeholders: ``{work}`` the item's own work folder, ``{runs}`` the shared work root,
``{json}`` the file the item's command writes its JSON to, ``{deadline}`` the seconds left
for a resumable item, ``{output}`` the output root (the records), ``{carried:ID}`` the
restored carry set of item ID and ``{record:ID}`` item ID's record (the item waits for
both). A step ``carry PATH`` (a folder) or ``carry --weights RUN_FOLDER`` (its newest
checkpoint's weights, in bf16, and its config) is done by the runner itself: it packs that
into the item's carry set, which comes back from the turn in parts (:mod:`.carry`).
"""

from __future__ import annotations

import shlex
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from .checklist import NEEDS

#: smoke: caps of the validation and test pools, applied where the data config has the key
SMOKE_CAPS = {"max_val_questions": 500, "val_questions": 500, "max_test_questions": 1000,
              "max_train_documents": 400, "max_test_documents": 100}
SMOKE_MINE_DOCUMENTS = 200
#: smoke of the distillation: questions of its reranker (a quick one, trained as a
#: prerequisite) and of the teacher's scores, over BM25-with-context lists
SMOKE_DISTILL = {"reranker": 200, "questions": 1000}
#: the rehearsal's caps (its pools are tiny): smoke items, train items, the queue's lines
REHEARSAL_CAPS = {"max_val_questions": 10, "val_questions": 10, "max_test_questions": 20,
                  "max_train_documents": 8, "max_test_documents": 4}
REHEARSAL_DISTILL = {"reranker": 10, "questions": 20}   # the same on the tiny pools
#: the rehearsal's training settings: every `rqa train` of every item (keys all configs have)
REHEARSAL_TRAIN = ["trainer.max_steps=2", "trainer.max_epochs=1", "data.batch_size=4",
                   "trainer.compile=null", "threads=1", "logger.name=none",
                   "trainer.enable_progress_bar=false"]
#: the rehearsal's bench options (module -> option -> value; None: drop the flag)
REHEARSAL_BENCH = {
    "bench.bench_encoding": {"--device": "cpu", "--precision": "32", "--n": "48",
                             "--n-questions": "24", "--rounds": "1", "--warmup-rounds": "1",
                             "--batch-size": "16", "--threads": "1"},
    "bench.bench_training": {"--device": "cpu", "--precision": "32", "--batch-size": "4",
                             "--warmup": "1", "--steps": "2", "--rounds": "2",
                             "--threads": "1"},
}
REHEARSAL_TABLE2 = ["ROWS=BM25,Dual-GRUs", "JOBS=2"]
#: the rehearsal runs a queue through its first pass only (the later sections repeat the
#: same commands with other seeds; tests/test_run_queue.py composes every line)
REHEARSAL_QUEUE_THROUGH = "first pass"
#: the rehearsal's `rqa mine` (tiny pools)
REHEARSAL_MINE_DOCUMENTS = "8"


@dataclass
class Context:
    device: str                       # cuda | cpu (the rehearsal)
    output_root: Path
    work_root: Path
    deadline_at: float                # time.monotonic() by which everything has stopped
    jobs: int = 1
    scale: float = 1.0                # expected seconds = minutes * 60 * scale
    env: dict = field(default_factory=dict)
    grace: float = 0.0                # SIGTERM this long before the deadline
    carry_in: Path | None = None      # the carry sets that travelled in (.device/carry)
    part_bytes: int | None = None     # the largest part of a carry set (None: carry's default)

    @property
    def rehearsal(self) -> bool:
        return self.device == "cpu"

    def left(self) -> float:
        return self.deadline_at - time.monotonic()


@dataclass
class Step:
    argv: list[str]                   # as the checklist writes it (`rqa`, `python`, `make`)
    skip_if: Path | None = None       # already there (a prerequisite made earlier): skip

    @property
    def internal(self) -> bool:
        """A ``carry`` step: done by the runner, no subprocess."""
        return self.argv[:1] == ["carry"]


def words_of(command: str) -> list[list[str]]:
    """The steps of a checklist command: shell words split at ``&&``."""
    steps, current = [], []
    for word in shlex.split(command):
        if word == "&&":
            steps.append(current)
            current = []
        else:
            current.append(word)
    return [*steps, current]


def resolve(words: list[str]) -> list[str]:
    """``rqa`` and ``python`` as this interpreter; ``make`` without its set-up step (``STAMP=``:
    the environment is there already, the Makefile's ``$(BIN)/python``)."""
    if words[0] == "rqa":
        return [sys.executable, "-m", "retrieval_qa.cli", *words[1:]]
    if words[0] == "python":
        return [sys.executable, *words[1:]]
    if words[0] == "make":
        return [*words, "STAMP="]
    return words


def carried_dir(ctx: Context, ident: str) -> Path:
    """Where item ``ident``'s carry set is restored (``{carried:ID}``)."""
    return ctx.work_root / "carried" / ident


def fill(text: str, item, ctx: Context) -> str:
    work = ctx.work_root / item.id
    left = max(0, int(min(ctx.left(), 1e7) - ctx.grace - 120))  # no run in the last 2 min

    def need(match) -> str:
        what, ident = match.groups()
        return str(carried_dir(ctx, ident) if what == "carried"
                   else ctx.output_root / f"{ident}.json")

    text = NEEDS.sub(need, text)
    return (text.replace("{work}", str(work)).replace("{runs}", str(ctx.work_root))
            .replace("{json}", str(work / "output.json")).replace("{deadline}", str(left))
            .replace("{output}", str(ctx.output_root)))


def set_option(argv: list[str], option: str, value: str | None) -> list[str]:
    """``argv`` with ``option``'s value replaced (or the option added; None: a flag dropped)."""
    argv = list(argv)
    if option in argv:
        i = argv.index(option)
        if value is None:
            del argv[i]
        else:
            argv[i + 1] = value
    elif value is not None:
        argv += [option, value]
    return argv


def smoke_steps(train: list[str], ctx: Context) -> list[Step]:
    """A smoke item's `rqa train` with its pool caps, and the prerequisites its data config
    asks for (mining: an exported retriever, a classifier, mined pairs; distillation: a
    reranker and its scores), made once per work root with the same smoke settings."""
    from retrieval_qa.training.compose import compose

    overrides = train[2:]
    cfg = compose(overrides)
    sizes = REHEARSAL_CAPS if ctx.rehearsal else SMOKE_CAPS
    caps = [f"data.{k}={v}" for k, v in sizes.items() if k in cfg.data]
    extra = REHEARSAL_TRAIN if ctx.rehearsal else []
    prereq = ctx.work_root / "smoke-prerequisites"
    retriever, mined = prereq / "retriever", prereq / "mined"
    classifier = prereq / "mining_classifier" / "gpu-seed1"
    steps: list[Step] = []
    needs_mined = cfg.data.get("mined") == "required"
    if "dense_retriever" in cfg.data or needs_mined:
        steps.append(Step(["rqa", "export", "experiment=mining_dual", "profile=gpu",
                           "--output", str(retriever)], retriever / "model.json"))
        caps.append(f"data.dense_retriever={retriever}" if "dense_retriever" in cfg.data
                    else f"data.mined={mined}")
    if needs_mined:
        steps.append(Step(["rqa", "train", "experiment=mining_classifier", "profile=gpu",
                           "seed=1", "trainer.max_steps=30",
                           *[f"data.{k}={v}" for k, v in sizes.items()
                             if k.endswith("_documents")],
                           f"data.dense_retriever={retriever}", f"output_dir={prereq}", *extra],
                          classifier / "result.json"))
        steps.append(Step(["rqa", "mine", "--classifier", str(classifier / "model"),
                           "--retriever", str(retriever), "--output", str(mined),
                           "--max-documents", str(SMOKE_MINE_DOCUMENTS), "--quiet"],
                          mined / "summary.json"))
    if "teacher" in cfg.data:  # distillation: a reranker, then its scores of BM25 lists
        sizes = REHEARSAL_DISTILL if ctx.rehearsal else SMOKE_DISTILL
        reranker, scores = prereq / "reranker", prereq / "teacher"
        steps.append(Step(["python", "-m", "retrieval_qa.classifiers.train_reranker",
                           "loss=listwise", f"questions={sizes['reranker']}", "max_minutes=null",
                           "model.training.accelerator=auto", f"output={reranker}"],
                          reranker / "training.json"))
        teacher = ["data.teacher.pipeline=bm25_context", f"data.teacher.reranker={reranker}",
                   f"data.teacher.questions={sizes['questions']}",
                   f"data.teacher.output={scores}"]
        steps.append(Step(["python", "experiments/distill_teacher.py", *overrides, *teacher,
                           "--quiet"], scores / "teacher.json"))
        caps += teacher
    steps.append(Step(["rqa", "train", *overrides, *caps, *extra]))
    return steps


def steps_of(item, ctx: Context) -> list[Step]:
    """The argv of each step of ``item`` on ``ctx``'s device (the rehearsal: shrunk)."""
    parts = [[fill(w, item, ctx) for w in words] for words in words_of(item.command)]
    if item.kind == "smoke":
        steps = smoke_steps(parts[-1], ctx)
    else:
        steps = [Step(p) for p in parts]
    if ctx.rehearsal:
        for step in steps:
            step.argv = shrink(step.argv, item.kind)
    return steps


def rehearsal_caps(train_words: list[str]) -> list[str]:
    """The rehearsal's pool caps whose keys the data config of ``rqa train WORDS`` has."""
    from retrieval_qa.training.compose import compose

    data = compose([w for w in train_words if "=" in w]).data
    return [f"data.{k}={v}" for k, v in REHEARSAL_CAPS.items() if k in data]


def shrink(argv: list[str], kind: str) -> list[str]:
    """The rehearsal's version of one step (see experiments/device_check.py's docstring)."""
    module = argv[2] if argv[1:2] == ["-m"] and len(argv) > 2 else ""
    if module in REHEARSAL_BENCH:
        for option, value in REHEARSAL_BENCH[module].items():
            argv = set_option(argv, option, value)
        return argv
    if kind == "train" and argv[:2] == ["rqa", "train"]:
        return [*argv, *rehearsal_caps(argv[2:]), *REHEARSAL_TRAIN]
    if kind == "train" and argv[:2] == ["rqa", "mine"]:
        return set_option(argv, "--max-documents", REHEARSAL_MINE_DOCUMENTS)
    if kind == "recipe" and argv[:1] == ["make"]:  # composed, not run: a CPU recipe of its own
        return [*argv, "-n"]
    if kind == "table2":
        rows = [] if any(w.startswith("ROWS=") for w in argv) else REHEARSAL_TABLE2[:1]
        return [*argv, *rows, *REHEARSAL_TABLE2[1:],
                f"TRAIN_OVERRIDES={' '.join(REHEARSAL_TRAIN)}"]
    if kind == "queue":
        return [*set_option(argv, "--through", REHEARSAL_QUEUE_THROUGH),
                "--train-overrides", " ".join(REHEARSAL_TRAIN),
                "--caps", " ".join(f"data.{k}={v}" for k, v in REHEARSAL_CAPS.items())]
    return argv
