"""Planning a sweep (`rqa sweep FILE`; :mod:`.run` runs the plan and says what the command
does): the file found, read and checked, its runs proposed and each composed into ``rqa train``
overrides and a run folder; nothing is run here.
"""

from __future__ import annotations

import copy
import hashlib
import json
import random
import re
import shlex
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from omegaconf import OmegaConf

from ..config import conf_names, find_conf, yaml_error_line
from ..errors import InputFileError, did_you_mean
from ..training.compose import compose
from ..training.run_folder import run_dir

DEFAULT_OUTPUT_DIR = "runs/sweeps"
ARGS_MACRO = "${args_no_hyphens}"
# `wandb agent` fills these; the runner knows what each gives (see agent_command)
_DROPPED_MACROS = ("${env}",)
_PROGRAM = ("rqa", "train")


def _sweeps_engine():
    """The ``sweeps`` module as wandb's local controller imports it (its warnings silenced)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from wandb import wandb_controller

    return wandb_controller.sweeps


# ----------------------------------------------------------------------------- the file


def find_sweep_file(name_or_path: str | Path) -> Path:
    """The sweep file: a path, or ``conf/sweeps/NAME.yaml`` (also in ``$RQA_CONF_PATH``).

    Args:
        name_or_path: a file's path, or a sweep's ``NAME`` (or ``NAME.yaml``).
    """
    p = Path(name_or_path)
    if p.is_file():
        return p
    found = find_conf("sweeps", str(name_or_path))
    if found is not None:
        return found
    names = conf_names("sweeps")
    raise FileNotFoundError(f"sweep file {name_or_path!r} not found ("
                            f"{did_you_mean(Path(name_or_path).stem, names)}a path, or one of "
                            f"conf/sweeps/: {names})")


def load_sweep(path: str | Path) -> dict:
    """The sweep file as wandb reads it (``yaml.safe_load``)."""
    try:
        with open(path, encoding="utf-8") as f:
            sweep = yaml.safe_load(f)
    except yaml.YAMLError as e:
        raise InputFileError("sweep file", path, f"not valid YAML ({yaml_error_line(e)})",
                             "repair the YAML at that line") from e
    except UnicodeDecodeError as e:
        raise InputFileError("sweep file", path, f"not UTF-8 text (byte {e.start})",
                             "give a YAML sweep file saved as UTF-8") from e
    if not isinstance(sweep, dict) or not sweep:
        raise InputFileError("sweep file", path, "not a sweep file (expected a YAML mapping)",
                             "write it in wandb's format: method, parameters, command")
    return sweep


def wandb_violations(sweep: dict) -> list[str]:
    """wandb's own checks: the JSON-schema violations that ``wandb sweep --controller`` reports
    (``_WandbController._validate``) and the server warns of; empty when wandb accepts it.

    Args:
        sweep: the sweep file's mapping (:func:`load_sweep`).
    """
    return list(_sweeps_engine().schema_violations_from_proposed_config(sweep))


def local_problems(sweep: dict) -> list[str]:
    """What this runner needs beyond wandb's schema: a ``command`` calling ``rqa train`` with
    ``${args_no_hyphens}`` (no other macro but ``${env}``), no value PyYAML reads as text (1e4).

    Args:
        sweep: the sweep file's mapping.
    """
    problems = []
    command = sweep.get("command")
    if not isinstance(command, list) or not command:
        problems.append("no `command`: give [rqa, train, ..., ${args_no_hyphens}] (wandb's "
                        "default command runs `python PROGRAM --key=value`, which rqa does not "
                        "take)")
        return problems
    words = [str(c) for c in command if str(c) not in _DROPPED_MACROS]
    if tuple(words[:2]) != _PROGRAM:
        problems.append(f"`command` must start with `rqa train` (after ${{env}}), got {words[:2]}")
    if words.count(ARGS_MACRO) != 1:
        problems.append(f"`command` must hold {ARGS_MACRO} once (the parameters as key=value "
                        "overrides)")
    other = [w for w in words if w.startswith("${") and w != ARGS_MACRO]
    if other:
        problems.append(f"`command` macros {other}: only {ARGS_MACRO} (and ${{env}}) can be "
                        "run by `rqa train`")
    strings = sorted({v for spec in (sweep.get("parameters") or {}).values()
                      for v in _leaves(spec) if isinstance(v, str) and _NUMBER.fullmatch(v)})
    if strings:
        problems.append(f"values {strings} are strings (YAML reads 1e4 as text): write them as "
                        "numbers with a dot and a signed exponent (1.0e+4) or in full (10000.0)")
    return problems


# 1e4, 1.0e4: numbers to YAML 1.2 and OmegaConf, text to PyYAML (wandb's reader), so a sweep
# value written so reaches wandb (and inside a dict value, `rqa train`) as a string
_NUMBER = re.compile(r"[-+]?(\d+\.?\d*|\.\d+)[eE][-+]?\d+")


def _leaves(node):
    if isinstance(node, dict):
        for v in node.values():
            yield from _leaves(v)
    elif isinstance(node, list):
        for v in node:
            yield from _leaves(v)
    else:
        yield node


def check_sweep(sweep: dict, where: str = "sweep") -> None:
    """Raise ValueError naming every problem (wandb's and this runner's).

    Args:
        sweep: the sweep file's mapping.
        where: the error's first words (the file's path).
    """
    problems = wandb_violations(sweep) + local_problems(sweep)
    if problems:
        raise ValueError(f"{where}: " + "; ".join(problems))


def sweep_name(sweep: dict, path: str | Path) -> str:
    return str(sweep.get("name") or Path(path).stem)


# ----------------------------------------------------------------------------- the runs


def propose(sweep: dict, *, method: str | None = None, count: int | None = None,
            seed: int = 0) -> list[dict[str, Any]]:
    """The runs of the sweep as ``{parameter: value}``, in the order wandb's engine proposes
    them: every grid point, or the first ``count`` random samples drawn with ``seed``.

    Args:
        sweep: the sweep file's mapping.
        method: ``grid`` or ``random`` (``bayes`` is refused); None: the file's.
        count: how many random samples (required: a prefix of a longer list); a grid ignores it.
        seed: the seed of the random samples.
    """
    engine = _sweeps_engine()
    method = method or sweep["method"]
    config = {**sweep, "method": method}
    if method == "grid":
        runs: list = []
        while (run := engine.next_run(config, runs, validate=False)) is not None:
            run.state = engine.RunState.finished
            runs.append(run)
        return [_values(r.config) for r in runs]
    if method == "random":
        if not count:
            raise ValueError("a random sweep needs --count N (how many settings to sample)")
        py_state = random.getstate()
        random.seed(seed)
        try:
            import numpy as np

            np_state = np.random.get_state()
            np.random.seed(seed)
            try:
                runs = [engine.next_run(config, [], validate=False) for _ in range(count)]
            finally:
                np.random.set_state(np_state)
        finally:
            random.setstate(py_state)
        return [_values(r.config) for r in runs]
    if method == "bayes":
        raise ValueError("method: bayes proposes each run from the metrics of the earlier ones, "
                         "which a wandb server collects: run it with `wandb sweep FILE` and "
                         "`wandb agent`, or sample the same space here with --method random "
                         "--count N")
    raise ValueError(f"method {method!r}: the local runner runs grid and random sweeps")


def _values(config: dict) -> dict[str, Any]:
    return {k: _plain(v["value"]) for k, v in config.items()}


def _plain(value):
    """numpy scalars (random samples) as Python numbers, so JSON and ``str()`` are clean."""
    if hasattr(value, "item") and not isinstance(value, (list, dict, str)):
        return value.item()
    return value


def agent_command(sweep: dict, params: dict[str, Any]) -> list[str]:
    """The command line ``wandb agent`` runs for these values: the file's ``command``, each
    macro filled as the agent fills it (``create_sweep_command_args``; ``${env}`` dropped).

    Args:
        sweep: the sweep file's mapping (its ``command``).
        params: the run's values, ``{parameter: value}`` (:func:`propose`'s).
    """
    from wandb.sdk.launch.sweeps.utils import create_sweep_command, create_sweep_command_args

    macros = create_sweep_command_args({"args": {k: {"value": v} for k, v in params.items()}})
    out: list[str] = []
    for chunk in create_sweep_command(sweep["command"]):
        chunk = str(chunk)
        if chunk in _DROPPED_MACROS:
            continue
        if chunk.startswith("${") and chunk.endswith("}"):
            out += [str(v) for v in macros.get(chunk[2:-1]) or []]
        else:
            out.append(chunk)
    return out


def varying(sweep: dict) -> list[str]:
    """The swept parameters (more than one value, or a distribution), less ``seed``.

    Args:
        sweep: the sweep file's mapping (its ``parameters``).
    """
    out = []
    for key, spec in (sweep.get("parameters") or {}).items():
        if key == "seed" or not isinstance(spec, dict) or "value" in spec:
            continue
        if "values" in spec and len(spec["values"]) < 2:
            continue
        out.append(key)
    return out


def _fmt(value) -> str:
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, dict):
        return "+".join(f"{k}-{_fmt(v)}" for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return "+".join(_fmt(v) for v in value)
    return str(value)


def setting_label(setting: dict[str, Any]) -> str:
    """A folder name for a setting: ``key=value`` of each swept parameter (the last part of a
    dotted key unless two share it), ``default`` for none; long ones shortened with a hash.

    Args:
        setting: a run's values of the swept parameters (:func:`varying`), in their order.
    """
    if not setting:
        return "default"
    tails = [k.rsplit(".", 1)[-1] for k in setting]
    parts = []
    for key, tail in zip(setting, tails, strict=True):
        short = tail if tails.count(tail) == 1 else key
        parts.append(f"{short}={_fmt(setting[key])}")
    label = ",".join(parts).replace("/", "_").replace(" ", "")
    if len(label) > 120:
        digest = hashlib.sha1(json.dumps(setting, sort_keys=True, default=str).encode())
        label = f"{label[:100]}-{digest.hexdigest()[:8]}"
    return label


@dataclass
class PlannedRun:
    """One run of the plan.

    Attributes:
        index: its number, from 1, in the order proposed.
        params: its values, ``{parameter: value}``.
        setting: those of the swept parameters (:func:`varying`).
        label: the setting's folder name (:func:`setting_label`).
        command: what ``wandb agent`` runs (online, after ``wandb sweep FILE``).
        overrides: what this runner gives ``rqa train``.
        run_dir: its run folder.
        status: planned | reused | running | finished | failed | interrupted | not run.
        metric: the sweep's metric (:func:`metric_value`); None: none, or not finished.
        seconds: how long ``rqa train`` ran; None: not run.
        returncode: its exit status; None: not run.
        config: its composed config (``rqa train``'s).
    """

    index: int
    params: dict[str, Any]
    setting: dict[str, Any]
    label: str
    command: list[str]            # what `wandb agent` runs (online, after `wandb sweep FILE`)
    overrides: list[str]          # what this runner gives `rqa train`
    run_dir: str
    status: str = "planned"       # planned | reused | finished | failed | interrupted | not run
    metric: float | None = None
    seconds: float | None = None
    returncode: int | None = None
    config: Any = field(default=None, repr=False)  # the composed config (rqa train's)

    @property
    def train_command(self) -> str:
        """The shell line that runs it as the runner does: ``rqa train``, the overrides quoted."""
        return " ".join(_shell_word(w) for w in (*_PROGRAM, *self.overrides))


def _shell_word(word: str) -> str:
    """``word`` as a POSIX shell reads it back: bare, or in double quotes when nothing in it is
    special there (a dict value: ``"k={'a': 1}"``), else :func:`shlex.quote`'s single quotes."""
    quoted = shlex.quote(word)
    if quoted == word or any(c in word for c in '"$`\\!'):
        return quoted
    return f'"{word}"'


def plan_runs(sweep: dict, name: str, output_dir: str | Path, *, method: str | None = None,
              count: int | None = None, seed: int = 0,
              threads: str | None = None) -> list[PlannedRun]:
    """Every run of the sweep with its ``rqa train`` overrides and run folder (each composed
    now, so a misspelt key fails before anything runs).

    Args:
        sweep: the sweep file's mapping.
        name: the sweep's name (:func:`sweep_name`): its folder and wandb group.
        output_dir: the sweeps' folder; a run's is ``OUTPUT_DIR/NAME/<setting>/...``.
        method: as :func:`propose`'s.
        count: as :func:`propose`'s.
        seed: as :func:`propose`'s.
        threads: a ``threads=`` override for the runs whose command sets none; None: none.
    """
    keys = varying(sweep)
    sweep_dir = Path(output_dir) / name
    planned, labels, composed = [], {}, {}
    for i, params in enumerate(propose(sweep, method=method, count=count, seed=seed)):
        setting = {k: params[k] for k in keys if k in params}
        label = setting_label(setting)
        key = json.dumps(setting, sort_keys=True, default=str)
        if labels.setdefault(label, key) != key:  # two settings, one folder name: add a hash
            label = f"{label}-{hashlib.sha1(key.encode()).hexdigest()[:8]}"
        command = agent_command(sweep, params)
        words = command[len(_PROGRAM):]
        own = ["logger=wandb", "logger.name=wandb", "logger.mode=offline", f"logger.group={name}",
               f"output_dir={sweep_dir / label}"]
        if threads and not any(w.startswith("threads=") for w in words):
            own.append(f"threads={threads}")
        replaced = {w.split("=", 1)[0] for w in own}
        overrides = [*(w for w in words if w.split("=", 1)[0] not in replaced), *own]
        # the seed changes no key: one composition per setting (composing takes ~0.2 s)
        seeds = [w for w in overrides if w.startswith("seed=")]
        key = tuple(w for w in overrides if not w.startswith("seed="))
        if key not in composed:
            try:
                composed[key] = compose(overrides)
            except (KeyError, ValueError, FileNotFoundError) as e:
                raise ValueError(f"sweep {name}, run {i + 1} ({params}): {e}") from e
        cfg = composed[key]
        seed_value = OmegaConf.from_dotlist(seeds[-1:]).get("seed", cfg.seed)
        if seed_value != cfg.seed:
            cfg = copy.deepcopy(cfg)
            cfg.seed = seed_value
        planned.append(PlannedRun(i + 1, params, setting, label, command, overrides,
                                  str(run_dir(cfg)), config=cfg))
    return planned


def metric_value(report: dict, name: str | None) -> float | None:
    """The sweep metric of a finished run's report: ``test/X`` the test pool's X; ``val/X`` the
    best validation score when X is the monitored one, else the last validation value.

    Args:
        report: the run's ``result.json``, read.
        name: the sweep's ``metric.name`` (``test/mrr``, ``val/...``); None or "": none.
    """
    if not name:
        return None
    stage, _, key = name.partition("/")
    if stage == "test":
        return (report.get("test") or {}).get("metrics", {}).get(key)
    if stage == "val":
        if report.get("monitor") == name and report.get("best_val_score") is not None:
            return report["best_val_score"]
        return (report.get("last_val") or {}).get(name)
    return None
