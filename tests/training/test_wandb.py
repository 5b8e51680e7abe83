"""`logger=wandb`: the run's mode follows `logger.mode`, else `WANDB_MODE`, else the user's
login (wandb's own credential lookup, in a temporary HOME: nothing is sent), and an offline run
reads back from wandb's own files (`wandb leet inspect`, wandb's reader of the run's .wandb
log): the composed config, the metrics the run logged and its result's test metrics, and the
config file among the run's files."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from helpers import tiny_overrides
from omegaconf import OmegaConf

from retrieval_qa.cli import main
from retrieval_qa.errors import OutOfRangeError
from retrieval_qa.training.compose import compose
from retrieval_qa.training.loggers import WANDB_CONFIG_FILE, wandb_logged_in, wandb_mode
from retrieval_qa.training.trainer import build_logger

pytest.importorskip("wandb")

KEY = "0123456789abcdef" * 3  # the form of a wandb API key (40+ word characters)


@pytest.fixture
def home(tmp_path, monkeypatch):
    """A user without wandb credentials or settings: an empty HOME, no wandb variables."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    for name in ("NETRC", "WANDB_API_KEY", "WANDB_IDENTITY_TOKEN_FILE", "WANDB_MODE", "WANDB_DIR"):
        monkeypatch.delenv(name, raising=False)
    return home


def _netrc(home: Path, machine: str) -> None:
    path = home / ".netrc"
    path.write_text(f"machine {machine}\n  login user\n  password {KEY}\n")
    path.chmod(0o600)


def _server() -> str:
    """The host of the server wandb logs to (its settings' ``base_url``)."""
    from wandb.sdk import wandb_setup

    return urlsplit(wandb_setup.singleton().settings.base_url).netloc


def test_the_mode_is_logger_mode_else_wandb_mode_else_the_login(home, monkeypatch):
    assert not wandb_logged_in()
    assert wandb_mode(None)[0] == "offline" and "wandb login" in wandb_mode(None)[1]
    monkeypatch.setenv("WANDB_API_KEY", KEY)
    assert wandb_mode(None) == ("online", "logged in to wandb")
    monkeypatch.delenv("WANDB_API_KEY")
    _netrc(home, "example.org")  # a key for another server
    assert wandb_mode(None)[0] == "offline"
    _netrc(home, _server())  # what `wandb login` writes
    assert wandb_logged_in() and wandb_mode(None)[0] == "online"
    monkeypatch.setenv("WANDB_MODE", "offline")
    assert wandb_mode(None) == ("offline", "WANDB_MODE")
    monkeypatch.setenv("WANDB_MODE", "disabled")
    assert wandb_mode(None) == ("disabled", "WANDB_MODE")
    assert wandb_mode("online") == ("online", "logger.mode")  # logger.mode wins over both
    (home / ".netrc").unlink()
    monkeypatch.delenv("WANDB_MODE")
    assert wandb_mode("online") == ("online", "logger.mode")
    assert wandb_mode("offline") == ("offline", "logger.mode")


def test_the_logger_block_gives_wandb_the_mode(setup_dirs, tmp_path, home, capsys):
    overrides = [o for o in tiny_overrides(setup_dirs, tmp_path) if not o.startswith("logger.")]
    assert compose([*overrides, "logger=wandb"]).logger.mode is None  # null: the login decides
    with pytest.raises(OutOfRangeError, match="logger.mode"):
        compose([*overrides, "logger=wandb", "logger.mode=onlin"])
    logger, _ = build_logger(compose([*overrides, "logger=wandb"]), tmp_path)
    assert logger._wandb_init["mode"] == "offline"  # not logged in
    assert "anonymous" not in logger._wandb_init  # wandb warns for any value, None included
    assert f"`wandb sync {tmp_path / 'wandb' / 'offline-run-*'}`" in capsys.readouterr().err
    cfg = compose([*overrides, "logger=wandb", "logger.mode=disabled"])
    assert build_logger(cfg, tmp_path)[0]._wandb_init["mode"] == "disabled"


def _inspect(run: Path, *options: str) -> str:
    """``wandb leet inspect``: wandb's reader of a run's .wandb log."""
    proc = subprocess.run([sys.executable, "-m", "wandb", "leet", "inspect", *options, str(run)],
                          capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout


def test_an_offline_run_reads_back_from_wandbs_own_files(setup_dirs, tmp_path, home, capsys,
                                                        one_thread):
    overrides = [o for o in tiny_overrides(setup_dirs, tmp_path / "run", "trainer.max_epochs=1")
                 if not o.startswith("logger.")]
    assert main(["train", *overrides, "logger=wandb"]) == 0  # not logged in: offline
    captured = capsys.readouterr()
    report = json.loads(captured.out.strip().splitlines()[-1])
    run_dir = Path(report["checkpoint"]).parent
    assert "wandb: offline (not logged in" in captured.err
    assert "anonymous setting has no effect" not in captured.err
    [run] = (run_dir / "wandb").glob("offline-run-*")

    summary = json.loads(_inspect(run, "--summary", "--json"))
    assert summary["state"] == "finished" and summary["exit_code"] == 0
    composed = OmegaConf.to_container(OmegaConf.load(run_dir / "config.yaml"), resolve=True)
    # the composed config, beside the module's hyperparameters that Lightning adds at the top
    assert {k: summary["config"].get(k) for k in composed} == composed
    test = report["test"]["metrics"]
    for name in ("mrr", "r@1"):
        assert summary["summary"][f"test/{name}"] == pytest.approx(test[name], abs=1e-4)
    assert "val/r@1" in summary["summary"]  # the other metric a committed sweep optimises

    records = [json.loads(line) for line in _inspect(run, "--json").splitlines()]
    logged = [r["history"]["item"]["train/loss"] for r in records
              if r["type"] == "history" and "train/loss" in r["history"]["item"]]
    with open(run_dir / "logs" / "version_0" / "metrics.csv") as f:  # logger.csv_copy
        in_csv = [float(r["train/loss"]) for r in csv.DictReader(f) if r["train/loss"]]
    assert logged and logged == pytest.approx(in_csv, abs=1e-6)
    saved = [f["path"] for r in records if r["type"] == "files" for f in r["files"]["files"]]
    assert WANDB_CONFIG_FILE in saved
    assert (run / "files" / WANDB_CONFIG_FILE).read_text() == (run_dir / "config.yaml").read_text()
