"""Run the device checklist (experiments/queues/device_checklist.txt): the next unfinished
items that fit before a deadline, each into one JSON, resumable across calls and turns.

    python experiments/device_check.py --deadline SECONDS [--device cuda|cpu] [--detach]
        [--output-root results/gpu/checklist] [--work-root runs/device-check] [--jobs N]
        [--only ID,ID] [--retry-failed]
    python experiments/device_check.py --status        # progress of a detached run
    python experiments/device_check.py --bundle FILE   # the results so far, as one .tar.gz
    python experiments/device_check.py --unbundle FILE # into the output root (collecting)

Items run in the checklist's order. A finished item (``OUTPUT_ROOT/ID.json``) is never run
again (``--retry-failed`` reruns the failed ones). An item starts only if its expected minutes
fit before the deadline (one stopped there anyway leaves ``ID.partial.json``, status
``interrupted``, with what it finished, and runs again from its start); a resumable item (``queue``) starts whenever a few minutes are left
and goes on where it stopped: its finished runs are kept in ``OUTPUT_ROOT/ID.partial.json``
and restored on the next call, also on a fresh machine (a run whose output a later,
unfinished line reads is run again instead). Before the deadline every running item gets
SIGTERM (``rqa train`` writes ``last.ckpt`` and stops; the same call on the same machine
resumes it), then SIGKILL. Smoke items run ``--jobs`` at once (default 4 on a GPU).

Each item's JSON holds ``item``, ``command``, ``device`` (the GPU's name, or the CPU's in the
rehearsal), ``versions``, ``status`` (passed / failed), ``seconds``, ``expected_minutes``,
its figures under self-explaining keys (``dev_pool_seconds``, ``ratio_ours_over_st``,
``sm_utilisation_mean``, ``mrr``, ...), ``output`` (the command's own JSON) and, when it
failed, ``error`` (the tail of its log).

``--device cpu`` is the rehearsal: every item on the CPU with tiny settings (2 training steps,
batch 4, a few texts per bench, Table 2's BM25 and Dual-GRUs rows, a queue through its first
pass), so that the checklist, its
JSON and its resume are tested without a GPU (tests/test_device_check.py, on tiny data and a
tiny model standing in for the packaged MiniLM). Its JSONs say ``"rehearsal": true`` and its
figures measure nothing. It writes into runs/device-rehearsal/ (or an ``--output-root`` of
its own; never results/gpu/checklist/, which holds GPU results).
"""

from __future__ import annotations

import argparse
import datetime as dt
import io
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tarfile
import time
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from experiments import run_queue  # noqa: E402

CHECKLIST = ROOT / "experiments" / "queues" / "device_checklist.txt"
OUTPUT_ROOT = ROOT / "results" / "gpu" / "checklist"
WORK_ROOT = ROOT / "runs" / "device-check"
REHEARSAL_ROOT = ROOT / "runs" / "device-rehearsal"   # --device cpu: its work and results
COLLECTED = ROOT / "runs" / "device-collected"        # --unbundle: a turn's logs and run files
KINDS = ("smoke", "bench", "evaluate", "table2", "queue", "cmd")
VERSIONS = ("torch", "transformers", "pytorch-lightning", "sentence-transformers", "numpy")
#: smoke: caps of the validation and test pools, applied where the data config has the key
SMOKE_CAPS = {"max_val_questions": 500, "val_questions": 500, "max_test_questions": 1000,
              "max_train_documents": 400, "max_test_documents": 100}
SMOKE_MINE_DOCUMENTS = 200
#: smoke of the distillation: questions of its reranker (a quick one, trained as a
#: prerequisite) and of the teacher's scores, over BM25-with-context lists
SMOKE_DISTILL = {"reranker": 200, "questions": 1000}
#: experiments whose gpu profile is another experiment's, unchanged (a CPU recipe's variant;
#: tests/training/test_profiles_run.py checks it): no item of their own
SAME_GPU_PROFILE = {"distill_hour": "distill"}
#: the rehearsal's caps (its pools are tiny): smoke items and the queue's training lines
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
                             "--n-questions": "24", "--rounds": "1", "--batch-size": "16",
                             "--threads": "1"},
    "bench.bench_training": {"--device": "cpu", "--precision": "32", "--batch-size": "4",
                             "--warmup": "1", "--steps": "2", "--threads": "1"},
}
REHEARSAL_TABLE2 = ["ROWS=BM25,Dual-GRUs", "JOBS=2"]
#: the rehearsal runs a queue through its first pass only (the later sections repeat the
#: same commands with other seeds; tests/test_run_queue.py composes every line)
REHEARSAL_QUEUE_THROUGH = "first pass"
MIN_SLICE_S = {"cuda": 240.0, "cpu": 0.0}   # a resumable item starts with at least this left
GRACE_S = {"cuda": 45.0, "cpu": 8.0}        # SIGTERM this long before the deadline
STATUS_FILE, LOG_FILE, PID_FILE = "status.json", "device-check.log", "device-check.pid"
BUNDLE_LIMIT = 15 * 2**20                   # one file back from the device: at most 16 MiB
ARTEFACTS = ("result.json", "config.yaml", "table2.md")


@dataclass
class Item:
    id: str
    minutes: float
    kind: str
    command: str          # with placeholders, as in the checklist

    @property
    def resumable(self) -> bool:
        return self.kind == "queue"


def parse_checklist(path: Path = CHECKLIST, experiments: list[str] | None = None) -> list[Item]:
    """The items of ``path``, a ``{experiment}`` line expanded over conf/experiment."""
    if experiments is None:
        from retrieval_qa.config import conf_names

        experiments = [e for e in conf_names("experiment") if e not in SAME_GPU_PROFILE]
    items: list[Item] = []
    for number, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        parts = line.split(None, 3)
        try:
            ident, minutes, kind, command = parts[0], float(parts[1]), parts[2], parts[3]
        except (IndexError, ValueError):
            raise ValueError(f"{path}:{number}: expected 'ID MINUTES KIND COMMAND', got "
                             f"{line.strip()!r}") from None
        if kind not in KINDS:
            raise ValueError(f"{path}:{number}: kind {kind!r} is not one of {KINDS}")
        names = experiments if "{experiment}" in ident else [None]
        for name in names:
            sub = (lambda t, n=name: t.replace("{experiment}", n)) if name else (lambda t: t)
            items.append(Item(sub(ident), minutes, kind, sub(command)))
    ids = [i.id for i in items]
    if len(set(ids)) != len(ids):
        raise ValueError(f"{path}: an item id is used twice: "
                         f"{sorted({i for i in ids if ids.count(i) > 1})}")
    return items


# ---- the commands ----------------------------------------------------------------------------

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

    @property
    def rehearsal(self) -> bool:
        return self.device == "cpu"

    def left(self) -> float:
        return self.deadline_at - time.monotonic()


@dataclass
class Step:
    argv: list[str]                   # as the checklist writes it (`rqa`, `python`, `make`)
    skip_if: Path | None = None       # already there (a prerequisite made earlier): skip


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


def fill(text: str, item: Item, ctx: Context) -> str:
    work = ctx.work_root / item.id
    left = max(0, int(min(ctx.left(), 1e7) - ctx.grace - 120))  # no run in the last 2 min
    return (text.replace("{work}", str(work)).replace("{runs}", str(ctx.work_root))
            .replace("{json}", str(work / "output.json")).replace("{deadline}", str(left)))


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


def steps_of(item: Item, ctx: Context) -> list[Step]:
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


def shrink(argv: list[str], kind: str) -> list[str]:
    """The rehearsal's version of one step (see the module docstring)."""
    module = argv[2] if argv[1:2] == ["-m"] and len(argv) > 2 else ""
    if module in REHEARSAL_BENCH:
        for option, value in REHEARSAL_BENCH[module].items():
            argv = set_option(argv, option, value)
        return argv
    if kind == "table2":
        return [*argv, *REHEARSAL_TABLE2, f"TRAIN_OVERRIDES={' '.join(REHEARSAL_TRAIN)}"]
    if kind == "queue":
        return [*set_option(argv, "--through", REHEARSAL_QUEUE_THROUGH),
                "--train-overrides", " ".join(REHEARSAL_TRAIN),
                "--caps", " ".join(f"data.{k}={v}" for k, v in REHEARSAL_CAPS.items())]
    return argv


# ---- the figures of each kind ----------------------------------------------------------------

#: the headline metrics of a test, whichever a method reports (retrieval: MRR, R@k, MRR@100;
#: residual paragraph retrieval: recall@k, average recall, AP; the mining classifier)
METRICS = ("mrr", "mrr@100", "r@1", "r@5", "r@10", "avg_recall", "ap", "acc", "auc_pr")


def _metrics(report: dict) -> dict:
    test = report.get("test") or {}
    metrics = test.get("metrics") or (test if "r@1" in test else report.get("metrics") or {})
    return {k: metrics[k] for k in METRICS if k in metrics}


def figures(item: Item, output: dict | None, work: Path) -> dict:
    """The self-explaining figures of ``item`` from its command's JSON ``output``."""
    if not output:
        return {}
    if item.kind == "smoke":
        test = output.get("test") or {}
        return {"global_steps": output.get("global_steps"), "precision": output.get("precision"),
                "compile": (output.get("trainer") or {}).get("compile"),
                "train_seconds": output.get("train_seconds"), "last_val": output.get("last_val"),
                **_metrics(output), "test_questions": test.get("questions"),
                "test_candidates": test.get("candidates"), "test_capped": test.get("capped"),
                "pretrained": output.get("pretrained")}
    if item.kind == "evaluate":
        return {"dev_pool_seconds": output.get("seconds"),
                "encode_seconds": output.get("encode_seconds"), **_metrics(output),
                "questions": output.get("questions"), "candidates": output.get("candidates")}
    if item.kind == "bench":
        util = output.get("gpu_utilization") or {}
        ours, st = util.get("ours") or {}, util.get("sentence_transformers") or {}
        out = {"ratio_ours_over_st": (output.get("all") or output).get("ratio_ours_over_st"),
               "goal_ratio": output.get("goal_ratio"),
               "sm_utilisation_mean": ours.get("mean_percent"),
               "sm_utilisation_mean_st": st.get("mean_percent"),
               "sm_utilisation_missing_because": util.get("missing_because")}
        if "all" in output:                                      # encoding
            out.update(ours_texts_per_s=output["all"]["ours_texts_per_s"],
                       st_texts_per_s=output["all"]["sentence_transformers_texts_per_s"],
                       ratio_answers=output["answers"]["ratio_ours_over_st"],
                       ratio_questions=output["questions"]["ratio_ours_over_st"])
        else:                                                    # training
            out.update({k: output.get(k) for k in (
                "ours_steps_per_s", "sentence_transformers_steps_per_s",
                "ratio_real_tokens_per_s")})
        return out
    if item.kind == "table2":
        rows = {}
        for path in sorted(work.rglob("*-*.json")):
            row = json.loads(path.read_text())
            if "metrics" in row:
                rows[path.stem] = {**_metrics(row),
                                   "seconds": (row.get("reproduced") or {}).get("seconds")}
        return {"rows": rows, "table_status": output.get("status"),
                "table_seconds": output.get("seconds")}
    if item.kind == "queue":
        return {"runs": output.get("runs")}
    return {}


# ---- the queue's runs: recorded, restored ----------------------------------------------------

def queue_runs(item: Item, ctx: Context) -> tuple[Path, list[run_queue.Run]]:
    """The queue file's runs that ``item`` covers, and its output root."""
    argv = words_of(fill(item.command, item, ctx))[-1]
    queue = ROOT / argv[2] if not Path(argv[2]).is_absolute() else Path(argv[2])
    root = Path(argv[argv.index("--output-root") + 1])
    through = argv[argv.index("--through") + 1] if "--through" in argv else None
    return root, run_queue.through(run_queue.parse_queue(queue), through)


def queue_records(item: Item, ctx: Context) -> dict:
    """Each finished run of ``item``'s queue on this machine: its result (training) or
    marker (command), keyed by its path under the queue's output root."""
    root, runs = queue_runs(item, ctx)
    records = {}
    for run in runs:
        _, where, _, marker, _ = run_queue.plan(run, root)
        if run_queue.is_done(where, marker):
            done = marker if marker is not None else where / "result.json"
            result = json.loads(done.read_text())
            # a training's config.yaml too: `rqa train` reuses a run only beside its settings
            config = None if marker is not None else (where / "config.yaml").read_text()
            records[str(where.relative_to(root))] = {
                "marker": marker is not None, "result": result, "config": config,
                **_metrics(result),
                "seconds": result.get("seconds"), "train_seconds": result.get("train_seconds")}
    return records


def restore_queue(item: Item, ctx: Context) -> list[str]:
    """Write back the finished runs recorded by any queue item's JSON (final or partial),
    except a run whose output a run still to do reads (it runs again). Returns what was
    restored."""
    root, runs = queue_runs(item, ctx)
    recorded: dict = {}
    for path in sorted(ctx.output_root.glob("*.json")):
        data = json.loads(path.read_text())
        if data.get("kind") == "queue":
            recorded.update(data.get("runs") or {})
    planned = [(run, *run_queue.plan(run, root)[1:4]) for run in runs]
    todo = [p for p in planned if not run_queue.is_done(p[1], p[3])
            and str(p[1].relative_to(root)) not in recorded]
    needed = True
    while needed:       # runs read by a run to do are to do too (transitively)
        needed = False
        read = " ".join(" ".join(run_queue.expand(p[0].words, root, p[0].folder)) for p in todo)
        for p in planned:
            if p not in todo and str(p[1]) in read and not run_queue.is_done(p[1], p[3]):
                todo.append(p)
                needed = True
    restored = []
    for _, where, _, marker in planned:
        key = str(where.relative_to(root))
        if key not in recorded or run_queue.is_done(where, marker) or \
                any(t[1] == where for t in todo):
            continue
        target = marker if recorded[key]["marker"] else where / "result.json"
        target.parent.mkdir(parents=True, exist_ok=True)
        if not recorded[key]["marker"]:
            if recorded[key].get("config") is None:  # recorded before configs were kept
                continue
            (where / "config.yaml").write_text(recorded[key]["config"])
        target.write_text(json.dumps(recorded[key]["result"], indent=2) + "\n")
        restored.append(key)
    return restored


# ---- running ---------------------------------------------------------------------------------

def versions() -> dict:
    import platform

    found = {"python": platform.python_version()}
    for name in VERSIONS:
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            found[name] = None
    return found


def device_name(device: str) -> str:
    """The GPU's name (nvidia-smi, else torch), or the CPU's model in the rehearsal."""
    if device == "cuda":
        smi = shutil.which("nvidia-smi")
        if smi:
            out = subprocess.run([smi, "--query-gpu=name,driver_version", "--format=csv,noheader"],
                                 capture_output=True, text=True, timeout=30)
            if out.returncode == 0 and out.stdout.strip():
                name, _, driver = out.stdout.splitlines()[0].partition(",")
                return f"{name.strip()} (driver {driver.strip()})"
        import torch

        return torch.cuda.get_device_name()
    from retrieval_qa.runtime import machine_info

    return f"CPU: {machine_info(1)['cpu']} (rehearsal)"


def now_iso() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds")


def last_json(text: str) -> dict | None:
    for line in reversed(text.strip().splitlines()):
        if line.startswith("{"):
            try:
                return json.loads(line)
            except json.JSONDecodeError:
                return None
    return None


def tail(path: Path, chars: int = 4000) -> str:
    return path.read_text(errors="replace")[-chars:] if path.is_file() else ""


class Runner:
    """One item's steps, one subprocess at a time (its own process group)."""

    def __init__(self, item: Item, ctx: Context, steps: list[Step], util) -> None:
        self.item, self.ctx, self.util = item, ctx, util
        self.work = ctx.work_root / item.id
        self.work.mkdir(parents=True, exist_ok=True)
        self.log = self.work / "item.log"
        self.steps = list(steps)
        self.parallel = item.kind == "smoke" and len(steps) == 1  # no shared prerequisite
        self.commands: list[str] = []
        self.proc: subprocess.Popen | None = None
        self.stdout = None
        self.start = time.monotonic()
        self.started_at = now_iso()
        self.code: int | None = None
        self.halt = self.stopped = False    # halt: start no further step; stopped: killed
        if item.kind == "queue":
            restored = restore_queue(item, ctx)
            if restored:
                self._note(f"restored {len(restored)} finished run(s) of earlier calls: "
                           + ", ".join(restored))
        self._next()

    def _note(self, text: str) -> None:
        with open(self.log, "a") as log:
            log.write(f"[device-check {now_iso()}] {text}\n")

    def _next(self) -> None:
        self.proc = None
        while self.steps:
            if self.halt:
                self.stopped = True
                return
            step = self.steps.pop(0)
            if step.skip_if is not None and step.skip_if.exists():
                self._note(f"skipped (made earlier: {step.skip_if}): {shlex.join(step.argv)}")
                continue
            self.commands.append(shlex.join(step.argv))
            self._note(f"running: {self.commands[-1]}")
            self.stdout = open(self.work / f"step{len(self.commands)}.out", "w+")
            with open(self.log, "a") as log:
                self.proc = subprocess.Popen(resolve(step.argv), cwd=ROOT, stdout=self.stdout,
                                             stderr=log, env=self.ctx.env,
                                             start_new_session=True)
            return

    def poll(self) -> bool:
        """True once every step is done (or one failed / was stopped)."""
        if self.proc is None:
            return True
        code = self.proc.poll()
        if code is None:
            return False
        self.stdout.flush()
        if code != 0 or self.stopped:
            self.code, self.proc = code, None
            return True
        self.code = 0
        self._next()
        return self.proc is None

    def stop(self, sig: int) -> None:
        """SIGTERM to the running step's own process (`rqa train` stops its loader workers
        itself, writing its checkpoint; run_queue passes it on), SIGKILL to its whole process
        group; no further step starts."""
        self.halt = True
        if self.proc is None:
            return
        if self.proc.poll() is None:
            self.stopped = True
        try:
            if sig == signal.SIGKILL:
                os.killpg(self.proc.pid, sig)
            elif self.proc.poll() is None:
                self.proc.send_signal(sig)
        except ProcessLookupError:
            pass

    def output(self) -> dict | None:
        json_file = self.work / "output.json"
        if json_file.is_file() and "{json}" in self.item.command:
            return json.loads(json_file.read_text())
        if self.stdout is None:
            return None
        self.stdout.seek(0)
        return last_json(self.stdout.read())

    def record(self) -> dict:
        """The item's JSON: final (passed / failed), partial (a resumable item stopped before
        its end) or interrupted (stopped; it runs again from its start)."""
        ctx, item = self.ctx, self.item
        seconds = round(time.monotonic() - self.start, 1)
        output = self.output()
        passed = self.code == 0 and not self.stopped
        record = {"item": item.id, "kind": item.kind,
                  "command": " && ".join(self.commands) or item.command,
                  "checklist_command": item.command, "device": ctx.env["RQA_DEVICE_NAME"],
                  "versions": json.loads(ctx.env["RQA_DEVICE_VERSIONS"]),
                  "rehearsal": ctx.rehearsal, "started_at": self.started_at,
                  "status": "passed" if passed else "failed", "seconds": seconds,
                  "expected_minutes": item.minutes}
        util = self.util.summary(item.id) if self.util is not None else None
        if util is not None:
            record["gpu_utilisation_whole_item_mean"] = round(util["mean_percent"], 1)
        record.update(figures(item, output, self.work))
        if item.kind == "queue":
            record["runs"] = queue_records(item, ctx)
            states = [r.get("state", "") for r in (output or {}).get("runs", [])]
            if passed and "left" in states:
                record["status"] = "partial"
            elif passed and any(s.startswith("failed") for s in states):
                record["status"] = "failed"
                record["failed_runs"] = {
                    r["run"]: tail(Path(r["run"]).parent / f"{Path(r['run']).name}.log", 2000)
                    for r in output["runs"] if r["state"].startswith("failed")}
        if self.stopped:
            record["status"] = "partial" if item.resumable else "interrupted"
            record["stopped"] = ("stopped at the deadline (SIGTERM): " + (
                "its finished runs are restored at the next call" if item.resumable else
                "it runs again from its start at the next call (what it finished is here)"))
        if record["status"] == "failed":
            record["error"] = tail(self.log)
            record["exit_code"] = self.code
        record["output"] = output
        return record


def finished(item: Item, output_root: Path, retry_failed: bool = False) -> dict | None:
    path = output_root / f"{item.id}.json"
    if not path.is_file():
        return None
    data = json.loads(path.read_text())
    return None if retry_failed and data.get("status") == "failed" else data


def shorten_paths(text: str) -> str:
    """A log tail without the machine's layout: each absolute path that :func:`portable`
    leaves (the interpreter's own files, say) cut to its last two parts."""
    from retrieval_qa.portable_paths import _ABSOLUTE

    return _ABSOLUTE.sub(lambda m: ".../" + "/".join(Path(m.group()).parts[-2:]), text)


def write_record(record: dict, output_root: Path) -> Path:
    from retrieval_qa.portable_paths import portable

    record = portable(record)
    if "error" in record:
        record["error"] = shorten_paths(record["error"])
    if "failed_runs" in record:
        record["failed_runs"] = {k: shorten_paths(v) for k, v in record["failed_runs"].items()}
    output_root.mkdir(parents=True, exist_ok=True)
    final = record["status"] in ("passed", "failed")
    path = output_root / f"{record['item']}{'' if final else '.partial'}.json"
    path.write_text(json.dumps(record, indent=2, default=str) + "\n")
    if final:
        (output_root / f"{record['item']}.partial.json").unlink(missing_ok=True)
    return path


def write_status(ctx: Context, state: dict) -> None:
    write_status_file(ctx.work_root, state, ctx.left())


def write_status_file(work_root: Path, state: dict, seconds_left: float) -> None:
    """``state`` as ``work_root/STATUS_FILE``, replaced at once (a poll never reads half)."""
    work_root.mkdir(parents=True, exist_ok=True)
    tmp = work_root / f".{STATUS_FILE}"
    tmp.write_text(json.dumps({**state, "updated_at": now_iso(),
                               "seconds_left": round(min(seconds_left, 1e9))}, indent=2))
    os.replace(tmp, work_root / STATUS_FILE)


def fits(item: Item, ctx: Context) -> bool:
    room = ctx.left() - ctx.grace
    if item.resumable:
        return room >= max(MIN_SLICE_S[ctx.device], 1.0)
    return item.minutes * 60 * ctx.scale <= room and room > 0


def run(items: list[Item], ctx: Context, retry_failed: bool = False) -> dict:
    """Run the unfinished items that fit; returns {finished, left, done_before, stopped}."""
    from bench.gpu_utilisation import Utilisation

    done_before = [i.id for i in items if finished(i, ctx.output_root, retry_failed)]
    pending = [i for i in items if i.id not in done_before]
    running: list[Runner] = []
    state = {"pid": os.getpid(), "device": ctx.env["RQA_DEVICE_NAME"], "started_at": now_iso(),
             "done_before": done_before, "finished": [], "stopped": [], "did_not_fit": [],
             "running": {}, "state": "running"}
    write_status(ctx, state)
    # GPU utilisation (nvidia-smi) over each item that runs alone, for its whole duration
    util = Utilisation("0" if ctx.device == "cuda" else None, poll=None, interval_s=0.5)

    def done(r: Runner) -> None:
        record = r.record()
        path = write_record(record, ctx.output_root)
        state["running"].pop(r.item.id, None)
        state["finished" if record["status"] in ("passed", "failed") else "stopped"].append(
            r.item.id)
        print(f"[{min(ctx.left(), 1e7):6.0f}s left] {record['status']:<11} {r.item.id} in "
              f"{record['seconds']:.0f}s -> {path}", flush=True)
        write_status(ctx, state)

    with util:
        while pending or running:
            if running and ctx.left() <= ctx.grace:      # the deadline: stop all
                for r in running:
                    r.stop(signal.SIGTERM)      # rqa train writes last.ckpt and exits
                while not all(r.poll() for r in running) and ctx.left() > 0.5:
                    time.sleep(0.2)
                for r in running:
                    r.stop(signal.SIGKILL)
                    if r.proc is not None:
                        r.code = r.proc.wait()
                    done(r)
                break
            while pending:
                item = pending[0]
                steps = steps_of(item, ctx)
                parallel = item.kind == "smoke" and len(steps) == 1
                if running and not (parallel and len(running) < ctx.jobs
                                    and all(r.parallel for r in running)):
                    break
                pending.pop(0)
                if not fits(item, ctx):
                    state["did_not_fit"].append(item.id)
                    continue
                running.append(Runner(item, ctx, steps, util))
                if not parallel:
                    util.begin(item.id)
                state["running"][item.id] = now_iso()
                write_status(ctx, state)
                print(f"[{min(ctx.left(), 1e7):6.0f}s left] started     {item.id}", flush=True)
            for r in [r for r in running if r.poll()]:
                running.remove(r)
                if not r.parallel:
                    util.end()
                done(r)
            time.sleep(0.2)
    state["running"] = {}
    state["state"] = "finished"
    state["left"] = [i.id for i in items if not finished(i, ctx.output_root)]
    write_status(ctx, state)
    return state


# ---- status, bundle ----------------------------------------------------------------------------

def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except (ProcessLookupError, PermissionError):
        return False
    return True


def status_text(items: list[Item], output_root: Path, work_root: Path) -> str:
    """Each item's state (passed / failed / partial / running / not run) and its main figure,
    whether a detached run is alive, and the tail of its log."""
    state = {}
    if (work_root / STATUS_FILE).is_file():
        state = json.loads((work_root / STATUS_FILE).read_text())
    is_alive = bool(state) and state.get("state") == "running" and alive(int(state["pid"]))
    running = state.get("running", {}) if is_alive else {}
    lines = []
    for item in items:
        data = finished(item, output_root)
        partial = output_root / f"{item.id}.partial.json"
        if item.id in running:
            text = f"running since {running[item.id]}"
        elif data is not None:
            key = next((k for k in ("dev_pool_seconds", "ratio_ours_over_st", "mrr",
                                    "table_seconds") if data.get(k) is not None), None)
            text = f"{data['status']} in {data['seconds']:.0f}s" + (
                f", {key} {data[key]}" if key else "")
        elif partial.is_file():
            data = json.loads(partial.read_text())
            text = (f"partial ({len(data.get('runs') or {})} runs kept)" if item.resumable else
                    f"interrupted after {data['seconds']:.0f}s at a deadline (runs again)")
        else:
            text = f"not run (about {item.minutes:g} min)"
        lines.append(f"{item.id:<34}{text}")
    head = "device-check: never started here" if not state else (
        f"device-check {'running' if is_alive else 'not running'} (pid {state['pid']}, "
        f"{state['state']}; at {state['updated_at']}: {state['seconds_left']} s to its deadline)")
    left = sum(i.minutes for i in items if finished(i, output_root) is None)
    log = tail(work_root / LOG_FILE, 1500)
    return "\n".join([head, *lines, f"left: about {left:g} GPU minutes",
                      *(["--- log tail ---", log] if log else [])])


def bundle(target: Path, output_root: Path, work_root: Path) -> Path:
    """One .tar.gz of the results so far (checklist/*.json) and the small artefacts of the
    work root (each run's result.json, config.yaml, Lightning CSV logs, Table 2's row JSONs),
    the status and the log; artefacts are left out first if it would pass the limit."""
    members = [(p, f"checklist/{p.name}") for p in sorted(output_root.glob("*.json"))]
    members += [(work_root / n, f"work/{n}") for n in (STATUS_FILE, LOG_FILE)
                if (work_root / n).is_file()]
    extra = [(p, f"work/{p.relative_to(work_root)}") for p in sorted(work_root.rglob("*"))
             if p.is_file() and (p.name in ARTEFACTS or p.suffix == ".csv"
                                 or re.fullmatch(r".+-(dev|train)\.json", p.name)
                                 or p.name == "item.log")
             and "checkpoints" not in p.parts]
    target.parent.mkdir(parents=True, exist_ok=True)
    for chosen in (members + extra, members):
        buffer = io.BytesIO()
        with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
            for path, name in chosen:
                tar.add(path, arcname=name)
        if buffer.tell() <= BUNDLE_LIMIT:
            target.write_bytes(buffer.getvalue())
            return target
    raise SystemExit(f"the results alone pass {BUNDLE_LIMIT} bytes: bring them back in parts")


def unbundle(source: Path, output_root: Path, work_to: Path) -> list[str]:
    """The checklist JSONs of a bundle into ``output_root``, its work files (logs, each run's
    result.json, config.yaml, CSV logs) under ``work_to``. Returns the files written."""
    written = []
    with tarfile.open(source) as tar:
        for member in tar.getmembers():
            parts = Path(member.name).parts
            if not member.isfile() or ".." in parts or Path(member.name).is_absolute():
                continue
            target = (output_root if parts[0] == "checklist" else work_to) / Path(*parts[1:])
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(tar.extractfile(member).read())
            written.append(str(target))
    for final in output_root.glob("*.json"):     # a partial record that its item replaced
        if not final.name.endswith(".partial.json"):
            (output_root / final.name.replace(".json", ".partial.json")).unlink(missing_ok=True)
    return written


# ---- the command line --------------------------------------------------------------------------

def parse_args(argv=None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--checklist", type=Path, default=CHECKLIST)
    ap.add_argument("--deadline", type=float, default=None,
                    help="seconds from now by which every item has stopped (default: none)")
    ap.add_argument("--device", choices=("cuda", "cpu"), default="cuda",
                    help="cuda (default), or cpu: the rehearsal with tiny settings")
    ap.add_argument("--output-root", type=Path, default=None,
                    help="where each item's JSON goes (default: results/gpu/checklist; with "
                         "--device cpu runs/device-rehearsal/checklist)")
    ap.add_argument("--work-root", type=Path, default=None,
                    help="runs, logs and the status (default: runs/device-check; with "
                         "--device cpu runs/device-rehearsal)")
    ap.add_argument("--jobs", type=int, default=None,
                    help="smoke items at once (default 4 on cuda, 1 on cpu)")
    ap.add_argument("--only", default=None, help="comma-separated item ids (default: all)")
    ap.add_argument("--retry-failed", action="store_true", help="run failed items again")
    ap.add_argument("--estimate-scale", type=float, default=None,
                    help="expected seconds = minutes * 60 * this (default 1 on cuda; 0 on "
                         "cpu, whose items are tiny)")
    ap.add_argument("--grace", type=float, default=None,
                    help="seconds before the deadline at which running items get SIGTERM "
                         "(default 45 on cuda, 8 on cpu)")
    ap.add_argument("--detach", action="store_true",
                    help="run in a new session in the background (log: WORK_ROOT/"
                         f"{LOG_FILE}) and return at once")
    ap.add_argument("--status", action="store_true", help="print progress and exit")
    ap.add_argument("--bundle", type=Path, default=None, help="write the results as a .tar.gz")
    ap.add_argument("--unbundle", type=Path, default=None,
                    help="extract a bundle's results into the output root")
    return ap.parse_args(argv)


def main(argv=None) -> int:
    args = parse_args(argv)
    argv = list(sys.argv[1:] if argv is None else argv)
    rehearsal = args.device == "cpu"
    args.output_root = args.output_root or (REHEARSAL_ROOT / "checklist" if rehearsal
                                            else OUTPUT_ROOT)
    args.work_root = args.work_root or (REHEARSAL_ROOT if rehearsal else WORK_ROOT)
    items = parse_checklist(args.checklist)
    if args.only:
        wanted = args.only.split(",")
        unknown = sorted(set(wanted) - {i.id for i in items})
        if unknown:
            raise SystemExit(f"--only: unknown item(s) {unknown}; items: {[i.id for i in items]}")
        items = [i for i in items if i.id in wanted]
    if args.status:
        print(status_text(items, args.output_root, args.work_root))
        return 0
    if args.bundle:
        print(bundle(args.bundle, args.output_root, args.work_root))
        return 0
    if args.unbundle:
        work_to = COLLECTED / dt.datetime.now().strftime("%Y-%m-%d_%H%M%S")
        written = unbundle(args.unbundle, args.output_root, work_to)
        jsons = [w for w in written if not w.startswith(str(work_to))]
        print(f"{len(jsons)} checklist JSONs into {args.output_root}; the turn's logs and run "
              f"files ({len(written) - len(jsons)}) into {work_to} (not committed: copy what a "
              "results README cites)")
        return 0
    if rehearsal and args.output_root.resolve() == OUTPUT_ROOT.resolve():
        raise SystemExit("--device cpu is the rehearsal: give it an --output-root of its own "
                         f"(not {OUTPUT_ROOT.relative_to(ROOT)}, which holds GPU results)")
    if args.detach:
        args.work_root.mkdir(parents=True, exist_ok=True)
        log = open(args.work_root / LOG_FILE, "a")
        child = [sys.executable, str(Path(__file__).resolve()),
                 *[a for a in argv if a != "--detach"]]
        proc = subprocess.Popen(child, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True)
        (args.work_root / PID_FILE).write_text(f"{proc.pid}\n")
        # the status says "running" from now on, not the last run's state (or none) until the
        # child has imported torch and written its own: a poll at once would stop waiting
        write_status_file(args.work_root, {
            "pid": proc.pid, "state": "running", "started_at": now_iso(), "running": {}},
            float("inf") if args.deadline is None else args.deadline)
        print(f"device-check started in the background: pid {proc.pid}, log "
              f"{args.work_root / LOG_FILE}; progress: --status (make device-check-status)")
        return 0
    if args.device == "cuda":
        import torch

        if not torch.cuda.is_available():
            raise SystemExit("--device cuda: torch sees no GPU here; the CPU rehearsal is "
                             "--device cpu with an --output-root of its own")
    deadline = args.deadline if args.deadline is not None else float("inf")
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "WANDB_MODE": "offline",
           "HF_HUB_OFFLINE": os.environ.get("HF_HUB_OFFLINE", "1"),
           "RQA_DEVICE_NAME": device_name(args.device),
           "RQA_DEVICE_VERSIONS": json.dumps(versions()),
           "PYTHONPATH": os.pathsep.join([str(ROOT), *filter(None, [
               os.environ.get("PYTHONPATH")])])}
    ctx = Context(args.device, args.output_root.resolve(), args.work_root.resolve(),
                  time.monotonic() + deadline,
                  args.jobs or (4 if args.device == "cuda" else 1),
                  args.estimate_scale if args.estimate_scale is not None
                  else (1.0 if args.device == "cuda" else 0.0), env,
                  args.grace if args.grace is not None else GRACE_S[args.device])
    print(f"device-check on {env['RQA_DEVICE_NAME']}: {len(items)} items, deadline "
          f"{deadline:g} s, results -> {ctx.output_root}", flush=True)
    state = run(items, ctx, args.retry_failed)
    left = state["left"]
    print(f"finished now: {', '.join(state['finished']) or 'none'}; stopped at the deadline: "
          f"{', '.join(state['stopped']) or 'none'}; did not fit: "
          f"{', '.join(state['did_not_fit']) or 'none'}")
    print(f"left: {len(left)} items, about {sum(i.minutes for i in items if i.id in left):g} "
          f"GPU minutes: {', '.join(left) or 'none'}")
    print(json.dumps({"finished": state["finished"], "stopped": state["stopped"],
                      "left": left}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
