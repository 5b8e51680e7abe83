"""Experiment loggers of `rqa train`, one per ``logger`` block (``conf/logger``): the block's
``_target_`` (or its short name, ``name: csv | wandb | none``, retrieval_qa/registry.py) is
called with the block's keys and, when it takes them, ``run_dir`` (the run's folder),
``run_name`` (``EXPERIMENT-PROFILE-seedN``) and ``config`` (the composed config). It returns
what ``pl.Trainer(logger=...)`` takes: a logger, a list of them, or False for none."""

from __future__ import annotations

import inspect
import os
import sys
from pathlib import Path

from omegaconf import DictConfig, OmegaConf
from pytorch_lightning.loggers import CSVLogger, WandbLogger
from pytorch_lightning.utilities import rank_zero_only

from ..errors import UsageError
from ..written import write_text

#: the composed config among a wandb run's files (wandb keeps its own ``config.yaml`` there
#: when it uploads a run: the same values in its own format)
WANDB_CONFIG_FILE = "rqa/config.yaml"


def csv_logger(run_dir: Path):
    """``RUN/logs/version_N/metrics.csv``.

    Args:
        run_dir: the run folder.
    """
    return CSVLogger(save_dir=str(run_dir), name="logs")


def wandb_logged_in() -> bool:
    """Whether wandb has the user's credentials without asking for them: ``WANDB_API_KEY``,
    the netrc entry that ``wandb login`` writes, or an ``api_key`` in wandb's settings files,
    as wandb's own lookup finds them (nothing is sent). A wandb without that lookup counts as
    not logged in (``WANDB_MODE`` or ``logger.mode`` decide there)."""
    from wandb.errors import AuthenticationError
    from wandb.sdk import wandb_setup

    try:
        from wandb.sdk.lib.wbauth import HostUrl, authenticate_session
    except ImportError:
        return False
    if not {"prompt", "update_session"} <= set(inspect.signature(authenticate_session).parameters):
        return False
    settings = wandb_setup.singleton().settings
    try:
        return authenticate_session(host=HostUrl(settings.base_url, app_url=settings.app_url),
                                    source="rqa train", prompt=False,
                                    update_session=False) is not None
    except AuthenticationError as e:
        raise UsageError(f"logger=wandb: wandb's credentials are not valid ({e}) (fix: "
                         "`wandb login --relogin`, or logger.mode=offline)") from None


def wandb_mode(mode: str | None) -> tuple[str, str]:
    """The mode of a wandb run and the reason: ``mode`` when set (``logger.mode``), else the
    ``WANDB_MODE`` environment variable when set, else online when the user is logged in
    (:func:`wandb_logged_in`) and offline when not.

    Args:
        mode: ``logger.mode`` (online, offline, disabled); None or empty: not set.
    """
    if mode:
        return mode, "logger.mode"
    if os.environ.get("WANDB_MODE"):
        return os.environ["WANDB_MODE"], "WANDB_MODE"
    if wandb_logged_in():
        return "online", "logged in to wandb"
    return "offline", "not logged in to wandb: `wandb login` for online runs"


class ConfigFileWandbLogger(WandbLogger):
    """Lightning's WandbLogger whose run, when it starts, holds the composed config among its
    files (:data:`WANDB_CONFIG_FILE`, the run folder's ``config.yaml``).

    Args:
        config_yaml: the composed config as YAML.
        **kwargs: passed to ``WandbLogger``.
    """

    def __init__(self, *, config_yaml: str, **kwargs) -> None:
        super().__init__(**kwargs)
        # Lightning always passes wandb.init(anonymous=None), and wandb warns "The anonymous
        # setting has no effect" for any value given, None included: it is not passed at all
        self._wandb_init.pop("anonymous", None)
        self._config_yaml = config_yaml

    @property
    def experiment(self):
        starting = self._experiment is None
        run = super().experiment
        if starting and self._experiment is not None:  # process 0, which logs
            path = write_text(Path(run.dir) / WANDB_CONFIG_FILE, self._config_yaml)
            run.save(str(path), base_path=run.dir, policy="now")
        return run


def wandb_logger(run_dir: Path, run_name: str, config: DictConfig, project: str,
                 mode: str | None, group: str | None = None, csv_copy: bool = False):
    """Weights & Biases in the mode of :func:`wandb_mode`, with the composed config as the
    run's config and as its file ``rqa/config.yaml``; an offline run is in
    ``RUN/wandb/offline-run-*`` (``wandb sync`` uploads it), as stderr says. ``group`` and
    ``csv_copy`` are absent from conf/logger/csv.yaml, which ``logger.name=wandb`` may turn
    into this logger.

    Args:
        run_dir: the run folder.
        run_name: the wandb run's name.
        config: the composed config.
        project: the wandb project.
        mode: online, offline, disabled, or None to follow ``WANDB_MODE`` and the user's login.
        group: the wandb group; None: none.
        csv_copy: the CSV logger as well, so the run folder holds its curves without wandb's
            tools.
    """
    mode, reason = wandb_mode(mode)
    if mode in ("offline", "dryrun") and rank_zero_only.rank == 0:
        runs = Path(run_dir) / "wandb" / "offline-run-*"
        print(f"wandb: offline ({reason}): the run goes to {runs}; `wandb sync {runs}` "
              "uploads it", file=sys.stderr, flush=True)
    wandb = ConfigFileWandbLogger(
        project=project, save_dir=str(run_dir), name=run_name, group=group, mode=mode,
        config=OmegaConf.to_container(config, resolve=True), config_yaml=OmegaConf.to_yaml(config))
    return [wandb, csv_logger(run_dir)] if csv_copy else wandb


def no_logger() -> bool:
    """No experiment logger (``logger.name=none``)."""
    return False
