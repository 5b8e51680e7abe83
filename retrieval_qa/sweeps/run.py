"""Running a planned sweep (`rqa sweep FILE`): each run is a step of the one runner
(:mod:`.runner`): ``train(compose_traced(overrides))`` in a subprocess (``python -m
retrieval_qa.cli train``, as ``wandb agent`` runs it) or in this process; finished runs are
kept, signals stop the sweep after the run saves its checkpoint, and the summary and the
comparison table are written at the end. The plan comes from :mod:`.plan`.

`rqa sweep FILE`: run a wandb sweep file (``conf/sweeps/``) here, without a wandb server.

A sweep file is in wandb's own format and is given unchanged to ``wandb sweep FILE`` when
online. Here the same file is run by a local controller built from wandb's own pieces:

- the file is checked with the checks of wandb's local controller
  (``wandb sweep --controller``: ``sweeps.schema_violations_from_proposed_config``, the
  ``sweeps`` engine of ``wandb[sweeps]``), plus what this runner needs (the command calls
  ``rqa train`` with ``${args_no_hyphens}``);
- the runs are proposed by that engine (``sweeps.next_run``): a grid in wandb's order, a
  random search sampled with a seed (so a rerun proposes the same settings); ``bayes`` needs the
  metrics a server collects and is refused (``--method random`` samples the same space);
- each run's command line is built as ``wandb agent`` builds it
  (``create_sweep_command_args``: ``${args_no_hyphens}`` becomes ``key=value`` for every
  parameter, ``str(value)``), so a parameter is an ``rqa train`` override: ``seed``,
  ``experiment`` or any config key (``model.gam.detach_cross``); a dict value sets several keys
  of one node at once (``model.cross_loss: {similarity: dot, scale: 1.0}``);
- then the runner sets its own overrides in place of the command's: ``logger=wandb``,
  ``logger.mode=offline`` (no server: ``wandb sync`` uploads the runs later), grouped by the
  sweep's name, and ``output_dir`` = ``<output-dir>/<sweep>/<setting>`` (the setting: the swept
  values other than the seed), so every run has its usual run folder,
  ``<output-dir>/<sweep>/<setting>/<experiment>/<profile>-seed<seed>/``, with ``sweep.json``
  (its parameters and commands) beside ``result.json`` and the offline wandb files.

A run whose folder holds a finished run of its settings (``result.json``, and ``config.yaml``
equal to the run's composed config: ``rqa train``'s own check,
:mod:`retrieval_qa.training.run_folder`) is reused, not run again; an interrupted run resumes
from its last checkpoint (``rqa train``'s own resume); a folder holding a run of other
settings (the sweep file changed since) stops the sweep before anything runs. Each run is
``rqa train`` in a subprocess, or with ``--in-process`` in the runner's process.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
import time
from pathlib import Path

from ..analysis.sweep_runs import read_run_plan
from ..progress import QUIET_TRAINING
from ..written import read_report, write_text
from .plan import (
    DEFAULT_OUTPUT_DIR,
    PlannedRun,
    _fmt,
    check_sweep,
    find_sweep_file,
    load_sweep,
    metric_value,
    plan_runs,
    sweep_name,
    varying,
)
from .runner import STOPPED_CODES, Action, Call, Process, Record, Step, run_steps

__all__ = ["DEFAULT_OUTPUT_DIR", "run_sweep"]

#: what the two commands of a run in a dry run's summary are
COMMANDS = {
    "command": "runs this run here as `rqa sweep` runs it (offline wandb, the sweep's run "
               "folder): copy it to a shell",
    "agent_command": "what `wandb agent` runs for the same parameters after `wandb sweep FILE` "
                     "(online; the agent fills ${oc.env:WANDB_RUN_ID,...} with its run's id)",
}


# ----------------------------------------------------------------------------- running


def _elapsed(seconds: float) -> str:
    s = int(seconds)
    return f"{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}"


def _progress(name: str, runs: list[PlannedRun], start: float, message: str) -> None:
    done = sum(r.status in ("reused", "finished") for r in runs)
    running = sum(r.status == "running" for r in runs)
    failed = sum(r.status == "failed" for r in runs)
    left = sum(r.status == "planned" for r in runs)
    skipped = sum(r.status == "not run" for r in runs)  # left out by --runs / --count
    print(f"rqa sweep {name}: {message} [{done} done, {running} running, {left} left"
          + (f", {failed} failed" if failed else "")
          + (f", {skipped} not in this call" if skipped else "") + f"; elapsed {_elapsed(time.perf_counter() - start)}]",
          file=sys.stderr, flush=True)


def _train(run: PlannedRun) -> Process:
    """``rqa train`` with the run's overrides in a subprocess of its own session, as ``wandb
    agent`` runs it (the runner passes SIGINT / SIGTERM on to it: a terminal's Ctrl-C reaches
    it once; it saves its checkpoint and exits, and the sweep stops)."""
    # the runs import this package from where the runner did (not another checkout's install)
    root = str(Path(__file__).resolve().parents[2])
    path = os.environ.get("PYTHONPATH")
    env = {**os.environ, "PYTHONPATH": root + (os.pathsep + path if path else "")}
    return Process([Action([sys.executable, "-m", "retrieval_qa.cli", "train",
                            *run.overrides])], env=env, new_session=True)


def _train_in_process(run: PlannedRun) -> Call:
    """``train(compose_traced(overrides))`` in this process (no interpreter start-up and imports
    per run, about 25 s on a busy 2-core machine: for sweeps of tiny runs). A signal stops the
    run as ``rqa train`` stops (checkpoint saved, exit 128+N); bad input is exit 2 and a crash
    exit 1, as ``rqa train`` exits."""
    return Call(lambda: _in_process_code(run))


def _in_process_code(run: PlannedRun) -> int:
    import traceback

    from ..errors import RunInterrupted, UsageError
    from ..training.compose import compose_traced
    from ..training.run import train

    try:
        with contextlib.redirect_stdout(sys.stderr):
            train(compose_traced(run.overrides))
        return 0
    except RunInterrupted as e:
        print(f"rqa: {e}", file=sys.stderr)
        return e.exit_code
    except (UsageError, FileNotFoundError, ValueError, KeyError, ImportError) as e:
        print("rqa: error: " + " ".join(str(e).split("\n")), file=sys.stderr)
        return 2
    except Exception:  # a crash of one run fails that run, as in a subprocess
        traceback.print_exc(file=sys.stderr)
        return 1


class SweepStep(Step):
    """A run of the sweep as a step of the runner: its ``sweep.json`` written when it starts,
    its status and metric when it ends, a progress line each time.

    Args:
        run: the planned run; its status, exit status, seconds and metric are set here.
        sweep: the sweep file's mapping.
        info: what each run's ``sweep.json`` says of the sweep: ``sweep`` (its name),
            ``file``, ``method``, ``metric`` (the metric's name; None: none) and ``goal``.
        runs: every run of the sweep (the progress line counts them by status).
        t0: the sweep's start (``time.perf_counter()``), for the elapsed time.
        in_process: run ``rqa train`` in this process, not in a subprocess.
        quiet: add :data:`~retrieval_qa.progress.QUIET_TRAINING` to the run's overrides.
    """

    def __init__(self, run: PlannedRun, sweep: dict, info: dict, runs: list[PlannedRun],
                 t0: float, in_process: bool, quiet: bool) -> None:
        self.run, self.sweep, self.info, self.runs, self.t0 = run, sweep, info, runs, t0
        self.in_process, self.quiet = in_process, quiet
        self.name = str(run.index)

    def start(self):
        r = self.run
        r.status = "running"
        if self.quiet:
            r.overrides = [*r.overrides, *QUIET_TRAINING]
        write_text(Path(r.run_dir) / "sweep.json", json.dumps(
            {**self.info, "index": r.index, "params": r.params, "setting": r.setting,
             "label": r.label, "agent_command": r.command, "overrides": r.overrides},
            indent=2, default=str) + "\n")
        _progress(self.info["sweep"], self.runs, self.t0,
                  f"run {r.index}/{len(self.runs)} starting: "
                  + " ".join(f"{k}={_fmt(v)}" for k, v in r.params.items()))
        return (_train_in_process if self.in_process else _train)(r)

    def end(self, job, record: Record) -> str:
        r, metric = self.run, self.info["metric"]
        r.returncode, r.seconds = job.code, job.seconds
        result = Path(r.run_dir) / "result.json"
        if r.returncode == 0 and result.is_file():
            r.status = "finished"
            r.metric = metric_value(read_report(result), metric)
        else:
            r.status = "interrupted" if job.stopped or r.returncode in STOPPED_CODES \
                else "failed"
        _progress(self.info["sweep"], self.runs, self.t0,
                  f"run {r.index}/{len(self.runs)} {r.status} in {r.seconds:.0f} s"
                  + (f" ({metric} {r.metric})" if r.metric is not None
                     else f" (exit {r.returncode})" if r.status != "finished" else ""))
        return {"finished": "finished", "failed": "failed"}.get(r.status, "stopped")


def _reusable(runs: list[PlannedRun], name: str, output_dir) -> list[PlannedRun]:
    """The runs whose folder holds a finished run of their settings (the same check as
    ``rqa train``'s: :func:`~retrieval_qa.training.run_folder.finished`). A folder holding a
    run of other settings (the sweep file changed since, say) stops the sweep before anything
    runs or is written, naming the runs and the settings that differ."""
    from ..errors import SettingsMismatchError
    from ..training.run_folder import describe, finished

    fix = (f"--output-dir DIR for a new sweep folder, or delete those run folders under "
           f"{Path(output_dir) / name} to run them again")
    done, clashes = [], []
    for r in runs:
        try:
            if finished(r.config, Path(r.run_dir), fix):
                done.append(r)
        except SettingsMismatchError as e:
            clashes.append((r, e.differences))
    if clashes:
        listed = "; ".join(f"run {r.index} ({r.run_dir}): {describe(d, 4)}"
                           for r, d in clashes[:5])
        more = f"; and {len(clashes) - 5} more runs" if len(clashes) > 5 else ""
        raise SettingsMismatchError(
            Path(output_dir) / name, dict(clashes[0][1]),
            f"sweep {name}: {len(clashes)} run folder(s) hold runs of other settings than the "
            f"sweep's: {listed}{more}; nothing was run (fix: {fix})")
    return done


def run_sweep(file: str | Path, *, count: int | None = None, dry_run: bool = False,
              output_dir: str | Path = DEFAULT_OUTPUT_DIR, method: str | None = None,
              seed: int = 0, threads: str | None = None, in_process: bool = False,
              only: list[int] | None = None, quiet: bool = False) -> dict:
    """Run (or with ``dry_run`` only plan) a sweep file; returns the summary: every run with
    its parameters, folder, status and metric, and the comparison table's files.

    Args:
        file: the sweep file's path, or a name of conf/sweeps/.
        count: grid: run at most this many of the runs not finished yet; random: how many
            settings to sample (required); None: every grid point.
        dry_run: plan and list the runs; run and write nothing.
        output_dir: the runs go to ``OUTPUT_DIR/<sweep name>/<setting>/``.
        method: ``grid`` or ``random`` in place of the file's; None: the file's.
        seed: the seed of random sampling.
        threads: the ``threads=`` override of every run whose command sets none; None: the
            config's.
        in_process: each run's ``rqa train`` in this process; False: in a subprocess, as
            ``wandb agent`` runs it.
        only: just these run numbers (as ``dry_run`` lists them), in this order; their
            folders are the full sweep's, so the rest can be run later; None: every run.
        quiet: the runs show no progress bar and no model summary (``rqa train --quiet``).
    """
    start = time.perf_counter()
    path = find_sweep_file(file)
    sweep = load_sweep(path)
    check_sweep(sweep, str(path))
    name = sweep_name(sweep, path)
    metric = (sweep.get("metric") or {}).get("name")
    runs = plan_runs(sweep, name, output_dir, method=method, count=count, seed=seed,
                     threads=threads)
    for r in _reusable(runs, name, output_dir):
        r.status = "reused"
        r.metric = metric_value(read_report(Path(r.run_dir) / "result.json"), metric)
        if (plan := Path(r.run_dir) / "sweep.json").exists():  # read by the table
            read_run_plan(plan)
    method = method or sweep["method"]
    todo = [r for r in runs if r.status == "planned"]
    if only:
        unknown = [i for i in only if not 1 <= i <= len(runs)]
        if unknown:
            raise ValueError(f"sweep {name} has runs 1 to {len(runs)}; --runs names {unknown} "
                             "(see the numbers with --dry-run)")
        wanted = list(dict.fromkeys(only))
        todo = [runs[i - 1] for i in wanted if runs[i - 1].status == "planned"]
        for r in runs:
            if r.status == "planned" and r.index not in wanted:
                r.status = "not run"
    if count is not None and method == "grid":
        for r in todo[count:]:
            r.status = "not run"
        todo = todo[:count]
    sweep_dir = Path(output_dir) / name
    stopped_by = None
    if not dry_run:
        write_text(sweep_dir / "sweep.yaml", path.read_text(encoding="utf-8"))
        _progress(name, runs, start, f"{len(runs)} runs ({method}), {len(todo)} to run, "
                                     f"into {sweep_dir}")
        info = {"sweep": name, "file": str(path), "method": method, "metric": metric,
                "goal": (sweep.get("metric") or {}).get("goal")}
        report = run_steps([SweepStep(r, sweep, info, runs, start, in_process, quiet)
                            for r in todo], forward=(signal.SIGINT, signal.SIGTERM))
        stopped_by = report.signal
        if stopped_by is None:   # a run stopped by a signal sent to it alone
            stopped_by = next((r.returncode - 128 for r in todo if r.status == "interrupted"
                               and r.returncode in STOPPED_CODES), None)
        for r in runs:
            if r.status == "planned":
                r.status = "not run"
    else:
        for r in runs:
            print(f"rqa sweep {name}: run {r.index}/{len(runs)} {r.status}: "
                  + " ".join(f"{k}={_fmt(v)}" for k, v in r.params.items())
                  + f" -> {r.run_dir}", file=sys.stderr, flush=True)
    summary = _summary(sweep, name, path, method, metric, runs, sweep_dir, dry_run, start)
    if not dry_run and any(r.status in ("reused", "finished") for r in runs):
        from .table import sweep_table

        summary["table"] = sweep_table(sweep_dir, output_dir=sweep_dir)["files"]
    if stopped_by:
        summary.update(interrupted=True, signal=stopped_by, exit_code=128 + stopped_by,
                       resume="run the same command again")
    elif summary["counts"].get("failed"):
        summary["exit_code"] = 1
    if not dry_run:
        write_text(sweep_dir / "summary.json", json.dumps(summary, indent=2, default=str) + "\n")
    return summary


def _summary(sweep, name, path, method, metric, runs, sweep_dir, dry_run, start) -> dict:
    counts: dict[str, int] = {}
    for r in runs:
        counts[r.status] = counts.get(r.status, 0) + 1
    by_setting: dict[str, list[float]] = {}
    for r in runs:
        if r.metric is not None:
            by_setting.setdefault(r.label, []).append(float(r.metric))
    best = None
    if by_setting and metric:
        sign = -1 if (sweep.get("metric") or {}).get("goal") == "minimize" else 1
        label = max(by_setting, key=lambda k: sign * sum(by_setting[k]) / len(by_setting[k]))
        vals = by_setting[label]
        best = {"setting": label, "metric": metric, "mean": round(sum(vals) / len(vals), 4),
                "runs": len(vals)}
    keep = ("index", "params", "label", "run_dir", "status", "metric", "seconds", "returncode")
    return {"sweep": name, "file": str(path), "method": method, "metric": sweep.get("metric"),
            "dry_run": dry_run, "output_dir": str(sweep_dir), "swept": varying(sweep),
            "runs": [{k: getattr(r, k) for k in keep}
                     | ({"command": r.train_command, "agent_command": r.command} if dry_run
                        else {})
                     for r in runs],
            **({"commands": COMMANDS} if dry_run else {}),
            "counts": counts, "best": best, "seconds": round(time.perf_counter() - start, 1)}
