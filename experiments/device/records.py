"""Each item's JSON: its figures by kind, the device and versions it ran on, written into the
output root (``ID.json`` when it ended, ``ID.partial.json`` when a deadline cut it); and the
queue items' finished runs, recorded and restored on a fresh machine."""

from __future__ import annotations

import datetime as dt
import json
import os
import shutil
import subprocess
from importlib import metadata
from pathlib import Path

from retrieval_qa.sweeps import queue as run_queue

from .checklist import ROOT, STATUS_FILE, VERSIONS, Item
from .commands import Context, fill, words_of

#: the headline metrics of a test, whichever a method reports (retrieval: MRR, R@k, MRR@100;
#: residual paragraph retrieval: recall@k, average recall, AP; the mining classifier)
METRICS = ("mrr", "mrr@100", "r@1", "r@5", "r@10", "avg_recall", "ap", "acc", "auc_pr")
#: what a train item records of each `rqa train` report (besides its metrics and test pool)
TRAIN_KEYS = ("experiment", "profile", "seed", "description", "profile_settings",
              "global_steps", "epochs", "precision", "train_seconds", "seconds",
              "best_val_score", "last_val", "pretrained", "resumed_from")


def _metrics(report: dict) -> dict:
    test = report.get("test") or {}
    metrics = test.get("metrics") or (test if "r@1" in test else report.get("metrics") or {})
    return {k: metrics[k] for k in METRICS if k in metrics}


def train_figures(report: dict) -> dict:
    """One `rqa train` report's figures: its settings (the profile's reductions are its
    ``description``), metrics and the pool it was tested on (``full_pool``: not capped)."""
    test = report.get("test") or {}
    pool = {k: test.get(k) for k in ("dataset", "pool", "questions", "candidates", "capped")}
    return {**{k: report.get(k) for k in TRAIN_KEYS},
            "compile": (report.get("trainer") or {}).get("compile"), **_metrics(report),
            "test_pool": pool, "full_pool": bool(test) and not test.get("capped"),
            "test_after_fit": bool(test)}


def _bench(output: dict) -> dict:
    util = output.get("gpu_utilization") or {}
    ours, st = util.get("ours") or {}, util.get("sentence_transformers") or {}
    summary = output.get("all") or output
    out = {"ratio_ours_over_st": summary.get("ratio_ours_over_st"),
           "ratio_per_round": summary.get("ratio_per_round"),
           "figure": summary.get("figure"), "goal_ratio": output.get("goal_ratio"),
           "setup": (output.get("settings") or {}).get("setup"),
           "gpu_busy_mean": ours.get("mean_percent"),
           "gpu_busy_mean_st": st.get("mean_percent"),
           "gpu_busy_measures": util.get("measures"),
           "gpu_busy_missing_because": util.get("missing_because")}
    if "all" in output:                                      # encoding
        out.update(ours_texts_per_s=output["all"]["ours_texts_per_s"],
                   st_texts_per_s=output["all"]["sentence_transformers_texts_per_s"],
                   ratio_answers=output["answers"]["ratio_ours_over_st"],
                   ratio_questions=output["questions"]["ratio_ours_over_st"])
    else:                                                    # training
        out.update({k: output.get(k) for k in (
            "ours_steps_per_s", "sentence_transformers_steps_per_s",
            "ratio_real_tokens_per_s", "flops")})
    return out


#: what a recipe item records of each reranker training (train_reranker's report)
RERANKER_KEYS = ("output", "questions", "steps_planned", "steps_done", "time_capped",
                 "loss", "batch_size", "last_loss", "data_seconds", "train_seconds")


def recipe_figures(output: list[dict], work: Path) -> dict:
    """A recipe's figures: its `rqa train` runs (the last one's metrics at the top), its
    reranker trainings, and each step's wall seconds from ``work/times.tsv`` (the recipe's
    ``TIMES``, experiments/timed.sh's columns)."""
    reports = [o for o in output or [] if isinstance(o, dict)]
    runs = [train_figures(o) for o in reports if "experiment" in o and "global_steps" in o]
    out = {"runs": runs, "rerankers": [{k: o.get(k) for k in RERANKER_KEYS}
                                       for o in reports if "steps_planned" in o]}
    if runs:
        out.update({k: runs[-1][k] for k in (*METRICS, "seed", "description", "test_pool",
                                             "full_pool") if k in runs[-1]})
    times = work / "times.tsv"
    if times.is_file():
        rows = [r for r in (line.split("\t") for line in times.read_text().splitlines())
                if len(r) >= 4 and r[2].isdigit()]            # the header line left out
        out["step_seconds"] = {r[1]: int(r[2]) for r in rows}
        out["step_exit_codes"] = {r[1]: int(r[3]) for r in rows}
    return out


def figures(item: Item, output, work: Path) -> dict:
    """The self-explaining figures of ``item`` from its command's JSON ``output`` (a train
    item: the list of its steps' JSONs)."""
    if item.kind == "recipe":
        return recipe_figures(output, work)
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
        return _bench(output)
    if item.kind == "train":
        steps = output if isinstance(output, list) else [output]
        runs = [train_figures(o) for o in steps if isinstance(o, dict) and "experiment" in o
                and "global_steps" in o]
        out = {"runs": runs}
        if runs:  # the item's own run is its last: its figures at the top too
            last = runs[-1]
            out.update({k: last[k] for k in (*METRICS, "seed", "description", "test_pool",
                                             "full_pool") if k in last})
        mined = [o for o in steps if isinstance(o, dict) and "mined_pairs" in o]
        if mined:
            out["mine"] = mined[-1]
        return out
    if item.kind == "table2":
        rows = {}
        for path in sorted(work.rglob("*-*.json")):
            row = json.loads(path.read_text())
            if "metrics" in row:
                training = row.get("training") or {}
                rows[path.stem] = {**_metrics(row),
                                   "seconds": (row.get("reproduced") or {}).get("seconds"),
                                   "questions": row.get("questions"),
                                   "candidates": row.get("candidates"),
                                   **{k: training.get(k) for k in ("seed", "description",
                                                                   "train_seconds")
                                      if k in training}}
        return {"rows": rows, "table_status": output.get("status"),
                "table_seconds": output.get("seconds")}
    if item.kind == "computed":
        return dict(output)
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


# ---- the machine, the files --------------------------------------------------------------------

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


def json_lines(text: str) -> list[dict]:
    """Every line of ``text`` that is a JSON object, in order (a recipe's reports)."""
    out = []
    for line in text.splitlines():
        if line.startswith("{"):
            try:
                obj = json.loads(line)
            except json.JSONDecodeError:
                continue
            if isinstance(obj, dict):
                out.append(obj)
    return out


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
