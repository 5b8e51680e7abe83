"""Training on mined pairs: ``data.mined=DIR`` (the output folder of ``rqa mine``).

:class:`MinedPairsDataModule` is the :class:`~.datamodule.ReQADataModule` with the miner's
mined pairs (the rows of ``DIR/pairs`` whose source is "mined") added as one extra pair
source (:meth:`~.datamodule.ReQADataModule.add_pair_source`), so they go through the same
machinery as ``data.extra_pairs``: overlap with the validation pool dropped and counted,
per-pair weights carried into batches as ``"weight"`` for the weighted in-batch softmax
(:class:`~retrieval_qa.losses.InBatchSoftmaxLoss`, supervised-mining eq. 2). The gold pairs
are the split's own (weight 1); the table's gold rows are not read twice.

``mined_weighting``: ``weighted`` (the paper: p^2 as the miner wrote it), ``unweighted``
(every mined pair weighs 1: the plain softmax on augmented data, the ablation of section 5),
``unused`` (the folder is checked and named in the run's data info, its pairs left out: the
gold-only row of a sweep that sets ``data.mined`` once for all its rows, conf/sweeps/
mining_ablation.yaml). With ``mined`` null the module is the plain ReQADataModule (gold pairs
only, no weights).
"""

from __future__ import annotations

from pathlib import Path

from ..written import Damaged, check, read_back, read_json, refuse
from .datamodule import ReQADataModule
from .types import QAPair

WEIGHTINGS = ("weighted", "unweighted", "unused")


def read_mined(folder: str | Path) -> tuple[list[QAPair], list[float], dict]:
    """(mined pairs, their weights, the miner's summary) of a finished ``rqa mine`` folder.

    Args:
        folder: the ``--output`` folder of ``rqa mine``.
    """

    folder = Path(folder)
    if not (folder / "pairs").is_dir() or not (folder / "summary.json").is_file():
        raise FileNotFoundError(f"data.mined={folder}: not a finished `rqa mine` output (no "
                                "pairs/ or summary.json); run the same `rqa mine` command again "
                                "to finish it")
    fix = ("run the same `rqa mine` command again: it writes pairs/ and summary.json again "
           "from its finished shards")
    try:
        summary = read_json(folder / "summary.json", ("gold_pairs", "mined_pairs"))
        table, sources = read_back(folder / "pairs", _read_pairs,
                                   "a datasets table of pairs (save_to_disk)")
        counts = {s: sources.count(s) for s in ("gold", "mined")}
        check(counts == {"gold": summary["gold_pairs"], "mined": summary["mined_pairs"]},
              folder / "pairs", f"{counts['gold']} gold and {counts['mined']} mined pairs, "
              f"summary.json says {summary['gold_pairs']} and {summary['mined_pairs']}")
    except Damaged as damage:
        raise refuse(damage, "data.mined", fix) from None
    # in memory: no processed-table cache file written into (or read from) the miner's folder
    table = table.filter(lambda source: source == "mined", input_columns="source",
                         keep_in_memory=True)
    pairs = [QAPair(r["question"], r["answer"], r["context"], r["question_id"], r["answer_id"])
             for r in table]
    return pairs, [float(w) for w in table["weight"]], summary


def _read_pairs(folder: Path):
    import datasets

    table = datasets.load_from_disk(str(folder))
    return table, table["source"]


class MinedPairsDataModule(ReQADataModule):
    """The ReQADataModule with the mined pairs of ``rqa mine`` (see the module docstring).

    Args:
        tokenizer: as :class:`~.datamodule.ReQADataModule`.
        mined: the ``--output`` folder of ``rqa mine``; None: none (gold pairs only);
            ``"required"``: an error asking for it.
        mined_weighting: ``weighted``, ``unweighted`` or ``unused``.
        **kwargs: the :class:`~.datamodule.ReQADataModule` arguments.
    """

    def __init__(self, tokenizer, *, mined: str | None, mined_weighting: str, **kwargs) -> None:
        super().__init__(tokenizer, **kwargs)
        if mined_weighting not in WEIGHTINGS:
            raise ValueError(f"data.mined_weighting={mined_weighting!r}; expected one of "
                             f"{WEIGHTINGS}")
        if mined == "required":
            raise ValueError("this experiment trains on mined pairs: give data.mined=DIR, the "
                             "--output folder of `rqa mine`")
        self.mined, self.mined_weighting = mined, mined_weighting
        if mined is None:
            return
        pairs, weights, summary = read_mined(mined)
        # a miner run on a sample of paragraphs names its pool "train[N documents, seed S]"
        mined_pool = str(summary.get("pool", "")).split("[", 1)[0]
        if (summary.get("dataset"), mined_pool) != (self.train_dataset, self.train_pool_name):
            raise ValueError(f"data.mined={mined} was mined on {summary.get('dataset')}/"
                             f"{summary.get('pool')} but this run trains on "
                             f"{self.train_dataset}/{self.train_pool_name}")
        if mined_weighting == "unweighted":
            weights = [1.0] * len(pairs)
        if mined_weighting != "unused":
            self.add_pair_source("mined", pairs, weights)
        self._info["mined"] = {
            "folder": str(mined), "weighting": mined_weighting,
            "weights": {"weighted": "p^2 from the classifier, gold pairs 1",
                        "unweighted": "1 for every pair (plain softmax on augmented data)",
                        "unused": "none: the mined pairs are left out, gold pairs only"}[
                mined_weighting],
            "mined_on": f"{summary.get('dataset')}/{summary.get('pool')}",
            "mined_pairs": len(pairs), "gold_pairs_of_pool": summary.get("gold_pairs"),
            "mined_over_gold_percent": summary.get("mined_over_gold_percent"),
            "retriever": summary.get("retriever"), "scorer": summary.get("scorer")}
