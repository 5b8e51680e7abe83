"""Tiny hand-written datasets, file writers and the loader of experiment scripts for tests."""

from __future__ import annotations

import gzip
import importlib.util
import json
import sys
from pathlib import Path

EXPERIMENTS = Path(__file__).resolve().parents[1] / "experiments"

TINY_SQUAD = {
    "version": "1.1",
    "data": [
        {"title": "Alpha", "paragraphs": [
            {"context": "Paris is the capital of France. It has the Eiffel Tower.\nBerlin is in Germany.",
             "qas": [
                 {"id": "q1", "question": "What is the capital of France?",
                  "answers": [{"answer_start": 0, "text": "Paris"}]},
                 {"id": "q2", "question": "What tower is in Paris?",
                  "answers": [{"answer_start": 43, "text": "Eiffel Tower"},
                              {"answer_start": 43, "text": "Eiffel"}]},
                 {"id": "q3", "question": "Where is Berlin?",
                  "answers": [{"answer_start": 70, "text": "Germany"}]},
             ]},
            {"context": "Berlin is in Germany. Munich is in Bavaria.",
             "qas": [
                 {"id": "q4", "question": "Where is Berlin?",
                  "answers": [{"answer_start": 13, "text": "Germany"}]},
                 {"id": "q5", "question": "Which state has Munich?",
                  "answers": [{"answer_start": 35, "text": "Bavaria"}]},
             ]},
        ]},
    ],
}


def write_json_gz(path: Path, obj) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with gzip.open(path, "wt", encoding="utf-8") as f:
        json.dump(obj, f)
    return path


def write_jsonl_gz(path: Path, rows) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with gzip.open(path, "wt", encoding="utf-8") as f:
        for r in rows:
            f.write(json.dumps(r) + "\n")
    return path


WORDS = "the a is of what where who fact place city about question".split()


def synthetic_squad(n_paragraphs: int = 40, sentences: int = 4) -> dict:
    """A SQuAD v1.1-format file: one question per sentence, plus an answer sentence shared by
    three questions and a question text asked in two paragraphs."""
    paragraphs = []
    for p in range(n_paragraphs):
        parts = [f"Fact {k} of place {p} is about the city number {p * 10 + k}."
                 for k in range(sentences)]
        context = " ".join(parts)
        starts = [context.index(s) for s in parts]
        qas = [{"id": f"p{p}q{k}", "question": f"What is fact {k} of place {p}?",
                "answers": [{"answer_start": starts[k] + 5, "text": str(k)}]}
               for k in range(sentences)]
        if p % 5 == 0:  # three questions share the first sentence
            qas += [{"id": f"p{p}x{j}", "question": f"Which city is number {p}0 (form {j})?",
                     "answers": [{"answer_start": starts[0], "text": "Fact"}]} for j in range(2)]
        if p == 1:  # a question text asked again in another paragraph
            qas.append({"id": "p1dup", "question": "What is fact 0 of place 0?",
                        "answers": [{"answer_start": starts[2], "text": "Fact"}]})
        paragraphs.append({"context": context, "qas": qas})
    return {"version": "1.1", "data": [{"title": "Synthetic", "paragraphs": paragraphs}]}


def word_tokenizer(words: list[str]):
    """A word-level WordPiece tokenizer: the special tokens, then one id per word of
    ``words``; any other word is one [UNK]."""
    from transformers import BertTokenizerFast

    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    return BertTokenizerFast(vocab={w: i for i, w in enumerate(specials + words)})


def make_dirs(root: Path, dev: dict, numbers: int = 10) -> tuple[Path, int]:
    """``root``/data/squad with the synthetic train file and ``dev``, and ``root``/tokenizer: a
    word-level vocabulary of WORDS and the numbers below ``numbers`` (other words are
    [UNK])."""
    write_json_gz(root / "data" / "squad" / "train-v1.1.json.gz", synthetic_squad())
    write_json_gz(root / "data" / "squad" / "dev-v1.1.json.gz", dev)
    tok = word_tokenizer(WORDS + [str(i) for i in range(numbers)])
    tok.save_pretrained(root / "tokenizer")
    return root, len(tok.vocab)


def tiny_overrides(setup_dirs, out, *extra) -> list[str]:
    """`rqa train` overrides of tiny random dual_gru towers on the training tests' data dir
    (the ``setup_dirs`` fixture of tests/training/conftest.py)."""
    root, _ = setup_dirs
    return [
        "experiment=dual_gru", "profile=cpu", f"model.towers.encoder.pretrained={root / 'tokenizer'}",
        "model.towers.encoder.embedding_dim=16",  # a random table, one row per tokenizer id
        "model.towers.encoder.hidden_size=16", "model.towers.encoder.dropout=0.0",
        "model.towers.pooler.hops=2", "model.towers.pooler.attention_dim=8",
        f"data.data_dir={root / 'data'}", "data.max_train_pairs=null",
        "data.max_val_questions=null", "data.batch_size=8", "data.max_question_length=16",
        "data.max_answer_length=24", f"output_dir={out}", "trainer.enable_progress_bar=false",
        "logger.name=none", "trainer.max_epochs=2", *extra]


def tiny(setup_dirs, out, *extra):
    from retrieval_qa.training.compose import compose

    return compose(tiny_overrides(setup_dirs, out, *extra))


def signal_at_step(monkeypatch, step: int, signum: int):
    """`rqa train` in this process receives ``signum`` at the end of training step ``step``
    (handled on the main thread before the step's checkpoint logic runs)."""
    import os

    from retrieval_qa.training.callbacks import ResumableCheckpoints

    original = ResumableCheckpoints.on_train_batch_end

    def hook(self, trainer, *args):
        if trainer.global_step == step and self.received is None:
            os.kill(os.getpid(), signum)
        return original(self, trainer, *args)

    monkeypatch.setattr(ResumableCheckpoints, "on_train_batch_end", hook)


def final_weights(monkeypatch) -> dict:
    """A dict that the next `rqa train` runs in this process fill with the trained module's
    weights when training ends (copies)."""
    from retrieval_qa.training.callbacks import ResumableCheckpoints

    weights: dict = {}

    def on_train_end(self, trainer, pl_module):
        weights.clear()
        weights.update({k: v.detach().clone() for k, v in pl_module.state_dict().items()})

    monkeypatch.setattr(ResumableCheckpoints, "on_train_end", on_train_end, raising=False)
    return weights


def load_experiment(name: str, monkeypatch=None):
    """``experiments/<name>.py`` as a module. With ``monkeypatch`` it is also registered in
    ``sys.modules`` for the test (dataclasses look their module up there)."""
    spec = importlib.util.spec_from_file_location(name, EXPERIMENTS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    if monkeypatch is not None:
        monkeypatch.setitem(sys.modules, name, module)
    spec.loader.exec_module(module)
    return module


def save_tiny_t5(folder: Path, tokenizer, d_model: int = 32, seed: int = 0):
    """A tiny random T5 1.1-shaped encoder-decoder (gated-gelu, 2 layers; saved as
    T5ForConditionalGeneration, as the hub's google/t5-v1_1-* are) with ``tokenizer``, in
    ``folder``. Returns the model."""
    import torch
    from transformers import T5Config, T5ForConditionalGeneration

    tokenizer.save_pretrained(folder)
    torch.manual_seed(seed)
    config = T5Config(vocab_size=len(tokenizer), d_model=d_model, d_kv=8, d_ff=2 * d_model,
                      num_layers=2, num_decoder_layers=2, num_heads=4,
                      feed_forward_proj="gated-gelu", dropout_rate=0.0, pad_token_id=0,
                      decoder_start_token_id=0, tie_word_embeddings=False)
    model = T5ForConditionalGeneration(config)
    model.save_pretrained(folder)
    return model


def save_tiny_bert_model(folder: Path, tokenizer, hidden: int = 24, layers: int = 2,
                         seed: int = 0):
    """A tiny random BertModel (BERT-base and MiniLM are both BertModels) with ``tokenizer``,
    in ``folder``; ``layers`` as the named checkpoint has them when a test needs their count
    (MiniLM: 6). Returns the model."""
    import torch
    from transformers import BertConfig, BertModel

    tokenizer.save_pretrained(folder)
    torch.manual_seed(seed)
    config = BertConfig(vocab_size=len(tokenizer), hidden_size=hidden, num_hidden_layers=layers,
                        num_attention_heads=2, intermediate_size=2 * hidden,
                        max_position_embeddings=512)
    model = BertModel(config)
    model.save_pretrained(folder)
    return model


def save_dual_encoder(folder: Path, tokenizer, towers_cfg: dict, similarity: str,
                      answer_with_context: bool = False,
                      builder: str = "retrieval_qa.encoders.build_dual_towers",
                      lengths: tuple[int, int] = (8, 12)) -> Path:
    """An exported dual encoder (``DualEncoderInference`` folder) of random towers built from
    ``towers_cfg`` by ``builder``, with ``tokenizer`` and the (question, answer) maximum
    ``lengths``; input-type vectors, when the towers have them, are drawn at random (not the
    zeros they start from). Returns ``folder``."""
    import torch

    from retrieval_qa.models.inference import DualEncoderInference
    from retrieval_qa.registry import locate

    torch.manual_seed(1)
    towers = locate(builder)(towers_cfg)
    input_types = getattr(towers.question_tower, "input_types", None)
    if input_types is not None:
        with torch.no_grad():
            input_types.weight.normal_()
    meta = {"max_question_length": lengths[0], "max_answer_length": lengths[1],
            "answer_with_context": answer_with_context, "builder": builder,
            "towers": towers_cfg, "similarity": similarity, "experiment": "test"}
    return DualEncoderInference(towers, tokenizer, meta).save(folder)


def from_conf(group: str, name: str, **arguments):
    """conf/<group>/<name>.yaml's ``_target_`` built with the file's values (their one source)
    as composition gives them (short names resolved) and ``arguments`` over them: a dict merges
    into the file's dict of that key; anything else replaces the file's value or adds an
    argument the file does not hold (a tokenizer, a ``dim``)."""
    from omegaconf import OmegaConf

    from retrieval_qa.registry import config_values, resolve_blocks, target_of
    from retrieval_qa.training.compose import load_group

    composed = OmegaConf.create({group: load_group(group, name)})
    resolve_blocks(composed)
    node = composed[group]
    values = config_values(node)
    for key, value in arguments.items():
        merge = isinstance(value, dict) and isinstance(values.get(key), dict)
        values[key] = {**values[key], **value} if merge else value
    return target_of(node, f"conf/{group}/{name}.yaml")(**values)


def towers_conf(model: str = "dual_encoder", /, **sections) -> dict:
    """The ``towers`` block of conf/model/<model>.yaml (the one source of its settings) as a
    plain dict, short names as written, with ``sections`` over it (a dict merges into its
    section, anything else replaces it): what the builders take whole."""
    from omegaconf import OmegaConf

    from retrieval_qa.training.compose import load_group

    cfg = OmegaConf.to_container(load_group("model", model).towers)
    for section, values in sections.items():
        if isinstance(values, dict):
            cfg[section].update(values)
        else:
            cfg[section] = values
    return cfg


def softmax_loss(**options):
    """``InBatchSoftmaxLoss`` with the settings of conf/model/dual_encoder.yaml's ``loss``
    block (their one source), ``options`` over them."""
    from retrieval_qa.losses import InBatchSoftmaxLoss
    from retrieval_qa.registry import config_values
    from retrieval_qa.training.compose import load_group

    return InBatchSoftmaxLoss.from_config(
        {**config_values(load_group("model", "dual_encoder").loss), **options})


def eval_conf(**overrides) -> dict:
    """The evaluator's settings of conf/eval/default.yaml (their one source), ``overrides``
    over them: ``evaluate(pool, scorer, **eval_conf(memory_mb=0.001))`` (less
    ``encode_batch_size``, which is ``rqa evaluate``'s, not the evaluator's)."""
    from retrieval_qa.evaluation.evaluator import evaluator_settings
    from retrieval_qa.training.compose import load_group

    return {**evaluator_settings(load_group("eval", "default")), **overrides}


def pool_scores(folder, pool):
    """[Q, C] scores of the model exported in ``folder`` on ``pool``, as the evaluator takes
    them: question and candidate embeddings (in the retrieval space) and their products."""
    from retrieval_qa.models.artifact import load_artifact

    model = load_artifact(folder, map_location="cpu")
    return (model.encode_questions(pool.questions, progress=False)
            @ model.encode_answers(pool.candidates, progress=False).T)


def rank_bounds(pool, scores, atol: float) -> dict:
    """``{"rank": (low, high), "doc rank": (low, high)}``, each [Q]: the lowest and highest
    rank that the protocol (the best gold score, average rank over ties; a paragraph scores
    its best sentence) gives ``pool``'s questions when every one of ``scores`` ([Q, C]) moves
    by at most ``atol`` / 2.

    Two computations of one model that differ in float rounding (batching, padding,
    processes, kernels) both rank within the bounds of the scores of either; their ranks may
    differ where two candidates score within ``atol``, so ranks and metrics of a tiny random
    model are never compared by ``==`` between them."""
    import torch

    from retrieval_qa.data.pool_index import doc_index

    scores = torch.as_tensor(scores, dtype=torch.float64)
    doc_of, n_docs = doc_index(pool)
    docs = torch.full((len(scores), n_docs), float("-inf"), dtype=torch.float64).scatter_reduce(
        1, doc_of.expand(len(scores), -1), scores, "amax")
    doc_gold = [sorted({int(doc_of[c]) for c in g}) for g in pool.gold]
    out = {}
    for level, table, gold in (("rank", scores, pool.gold), ("doc rank", docs, doc_gold)):
        best = torch.stack([row[g].max() for row, g in zip(table, gold, strict=True)])[:, None]
        out[level] = (1 + (table > best + atol).sum(1).double(),
                      (table >= best - atol).sum(1).double())
    return out


def assert_ranks_fit_scores(record, pool, scores, atol: float) -> None:
    """Each rank and doc rank of ``record`` (a per-question record of ``pool``) lies within
    the :func:`rank_bounds` of ``scores``. Most ranks must be fixed by the scores (no other
    candidate within ``atol`` of the best gold): else the check would hold for any ranks."""
    bounds = rank_bounds(pool, scores, atol)
    for level, ranks in (("rank", record.ranks), ("doc rank", record.doc_ranks)):
        if ranks is None:
            continue
        low, high = bounds[level]
        for q, rank in enumerate(ranks.tolist()):
            assert low[q] <= rank <= high[q], (f"question {q}: {level} {rank}, the scores give "
                                               f"{low[q]:g} to {high[q]:g} (within {atol})")
    low, high = bounds["rank"]
    fixed = int((low == high).sum())
    assert 2 * fixed >= len(low), f"{len(low) - fixed} of {len(low)} ranks not fixed by the scores"


def damage(path: Path, how: str) -> bool:
    """Damage the file ``path`` in one of the ways every reader of the suite's files must
    name: ``truncated`` (its first half kept), ``empty``, ``garbage`` (bytes of no format).
    False, the file untouched, for any other ``how`` (one the caller applies itself)."""
    data = path.read_bytes()
    if how == "truncated":
        path.write_bytes(data[:len(data) // 2])
    elif how == "empty":
        path.write_bytes(b"")
    elif how == "garbage":
        path.write_bytes(bytes(range(256)) * 4)
    else:
        return False
    return True


#: a ``python -c`` script running ``rqa train ARGS`` that SIGKILLs itself at ``$KILL``:
#: ``step:N`` (after training step N and what its end wrote), ``last:E`` (right after the first
#: last.ckpt written in epoch E) or ``validation:E`` (at the first validation batch of epoch E)
KILLER = """
import os, signal, sys
from retrieval_qa.training.resumable_checkpoints import ResumableCheckpoints
kind, _, at = os.environ["KILL"].partition(":")
at = int(at)

def kill():
    os.kill(os.getpid(), signal.SIGKILL)  # no handler, nothing saved: a hard kill

if kind == "step":  # after training step `at` and what its end wrote
    end = ResumableCheckpoints.on_train_batch_end
    def on_train_batch_end(self, trainer, *args):
        end(self, trainer, *args)
        if trainer.global_step == at:
            kill()
    ResumableCheckpoints.on_train_batch_end = on_train_batch_end
elif kind == "last":  # right after the first last.ckpt written in epoch `at`
    save = ResumableCheckpoints.save
    def save_last(self, trainer):
        path = save(self, trainer)
        if trainer.current_epoch == at:
            kill()
        return path
    ResumableCheckpoints.save = save_last
elif kind == "validation":  # at the first validation batch of epoch `at`
    def on_validation_batch_end(self, trainer, *args):
        if trainer.current_epoch == at:
            kill()
    ResumableCheckpoints.on_validation_batch_end = on_validation_batch_end
from retrieval_qa.cli import main
sys.exit(main(["train", *sys.argv[1:]]))
"""


def killed_run(overrides: list[str], kill: str, log: Path, cwd: Path, **env) -> int:
    """``rqa train OVERRIDES`` in a new process killed with SIGKILL at ``kill`` (see
    :data:`KILLER`); its return code. A hard kill can leave the run's loader workers behind
    (orphans that do not always notice their parent's death): the output goes to ``log``, not to
    pipes they would hold open, and the run's session is killed after it.

    Args:
        overrides: the run's ``key=value`` settings.
        kill: where it kills itself (``step:N``, ``last:E``, ``validation:E``).
        log: the file its stdout and stderr go to.
        cwd: the folder it runs in.
        env: more environment variables (e.g. ``RQA_THREADS="1"``).
    """
    import contextlib
    import os
    import signal
    import subprocess

    repo = Path(__file__).resolve().parents[1]
    environment = {**os.environ, "PYTHONPATH": str(repo), "KILL": kill, **env}
    with open(log, "w") as output:
        proc = subprocess.Popen([sys.executable, "-c", KILLER, *overrides], env=environment,
                                cwd=cwd, stdout=output, stderr=subprocess.STDOUT,
                                start_new_session=True)
        try:
            return proc.wait(timeout=300)
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
