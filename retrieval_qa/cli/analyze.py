"""Arguments and dispatch of ``rqa analyze {one-to-many|similarity|bertqa|tsne|towers|ablation|
side-by-side}``.

Models are given as ``--model NAME=FOLDER`` (exported dual-encoder folders, the `checkpoint`
of ``rqa train``); the same NAME several times means several runs (seeds) of one method,
reported as mean ± std. Every command writes into ``--output-dir`` (default runs/analysis)
and returns one JSON-able dict (printed by ``rqa`` on the last line of stdout).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from ..analysis.common import DEFAULT_OUTPUT_DIR, parse_named
from ..errors import ConflictingOptionsError, InputFileError
from .parsing import add_command
from .pools import add_data_args, load

CLASSIFIER_CONF = "conf/model/cross_classifier.yaml"

DESCRIPTION = """\
Analyses of trained models (exported folders, --model NAME=DIR) and of finished runs
(--report NAME=RUN, --sweep DIR): metrics on one-to-many subsets (ENDX Table 4, Figure 2),
question-question similarity matrices (Figure 3), BERTQA against dual encoders with timings
(Table 6), t-SNE of questions sharing an answer (Figure 4) and of both towers (SDE/ADE
Figure 2), the GAM ablation (Table 5), and side-by-side tables of runs or of a sweep's
settings. Each writes tables (.md, .json) and figures (.png) into --output-dir."""

EXAMPLES = {
    "analyze": """\
examples:
  rqa analyze one-to-many --model Dual-GRUs=runs/dual_gru/cpu-seed42/model \\
      --model ENDX-GRUs=runs/endx_gru/cpu-seed42/model
  rqa analyze side-by-side --sweep runs/sweeps/endx_confounds --metrics p@1,mrr
  rqa analyze ANALYSIS --help   # the options of one analysis""",
    "one-to-many": """\
example (the same NAME again = another seed, reported as mean ± std):
  rqa analyze one-to-many --model Dual-GRUs=runs/dual_gru/cpu-seed1/model \\
      --model Dual-GRUs=runs/dual_gru/cpu-seed2/model --model ENDX-GRUs=runs/endx_gru/cpu-seed1/model""",
    "similarity": """\
example:
  rqa analyze similarity --endx-run runs/endx_gru/cpu-seed42 \\
      --dual-model runs/dual_gru/cpu-seed42/model --tag gru""",
    "bertqa": """\
example:
  rqa analyze bertqa --model Dual-BERTs=runs/dual_bert/cpu-seed42/model --steps 200""",
    "tsne": """\
example:
  rqa analyze tsne --model Dual-GRUs=runs/dual_gru/cpu-seed42/model \\
      --model ENDX-GRUs=runs/endx_gru/cpu-seed42/model --tag gru""",
    "towers": """\
example:
  rqa analyze towers --model SDE=runs/sde/cpu-seed42/model --model ADE=runs/ade/cpu-seed42/model \\
      --label 'trained, CPU profile'""",
    "ablation": """\
example:
  rqa analyze ablation --report ENDX-GRUs=runs/endx_gru/cpu-seed42 \\
      --report "w/o QQ=runs/ablation_qq/endx_gru/cpu-seed42" --reference ENDX-GRUs""",
    "side-by-side": """\
examples:
  rqa analyze side-by-side --report Dual-GRUs=runs/dual_gru/cpu-seed42 \\
      --report ENDX-GRUs=runs/endx_gru/cpu-seed42
  rqa analyze side-by-side --sweep runs/sweeps/sde_ade --metrics p@1,mrr""",
}


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--output-dir", default=DEFAULT_OUTPUT_DIR,
                   help=f"folder for tables (.md, .json) and figures (.png) "
                        f"(default {DEFAULT_OUTPUT_DIR})")


def _models(p: argparse.ArgumentParser, required: bool = True) -> None:
    p.add_argument("--model", action="append", default=[], required=required, metavar="NAME=DIR",
                   help="an exported dual-encoder folder; repeat (the same NAME again = "
                        "another run of that method)")


def _reports(p: argparse.ArgumentParser, required: bool = True) -> None:
    p.add_argument("--report", action="append", default=[], required=required,
                   metavar="NAME=PATH", help="result.json (or its run folder); repeat, the "
                                             "same NAME again = another seed")


def add_parser(commands) -> None:
    """``rqa analyze``: the analyses as its subcommands, each with its example.

    Args:
        commands: the subparsers of ``rqa``.
    """
    parser = add_command(commands, "analyze", epilog=EXAMPLES["analyze"],
                         help="analyses of trained models and finished runs: one-to-many, "
                              "similarity, t-SNE, BERTQA, ablation and side-by-side tables",
                         description=DESCRIPTION)
    sub = parser.add_subparsers(dest="analysis", required=True, metavar="ANALYSIS")

    def add(name: str, help: str) -> argparse.ArgumentParser:
        return add_command(sub, name, run=run, epilog=EXAMPLES[name], help=help,
                           description=help[0].upper() + help[1:] + ".")

    om = add("one-to-many", help="Table 4 + Figure 2: metrics on the subsets of "
                                            "questions whose answer has >= k questions")
    _models(om)
    add_data_args(om)
    om.add_argument("--max-k", type=int, default=8, help="subsets k = 1..MAX_K (default 8)")
    om.add_argument("--table-k", type=int, default=8, help="the k of Table 4 (default 8)")
    om.add_argument("--batch-size", type=int, default=128, help="texts per encoding batch")
    _common(om)

    si = add("similarity", help="Figure 3: question-question similarity matrices "
                                           "(ENDX cross, ENDX dual, baseline dual)")
    si.add_argument("--endx-run", default=None,
                    help="an `rqa train` run folder of ENDX (reads its result.json for the "
                         "Lightning checkpoint and the exported towers)")
    si.add_argument("--endx-checkpoint", default=None,
                    help="ENDX Lightning .ckpt (with the cross-encoder); overrides --endx-run's")
    si.add_argument("--endx-model", default=None,
                    help="ENDX exported towers folder (tokenizer, dual towers); default: the "
                         "run's model/")
    si.add_argument("--dual-model", required=True, help="baseline dual-encoder exported folder")
    si.add_argument("--answer", default=None, help="candidate id or exact sentence (default: "
                                                   "the answer with the most questions)")
    si.add_argument("--max-questions", type=int, default=10,
                    help="questions of the answer shown in the matrices")
    si.add_argument("--tag", default=None, help="suffix of the file names (figure3_TAG.*)")
    add_data_args(si)
    _common(si)

    bq = add("bertqa", help="Table 6: BERTQA (concatenated cross-attention "
                                       "classifier) vs dual encoders, with timings")
    _models(bq)
    add_data_args(bq, pool_help="pool the test sample is drawn from")
    bq.add_argument("--train-dataset", default=None, help="BERTQA training data (default: "
                                                          "--dataset)")
    bq.add_argument("--train-pool", default="train", help="BERTQA training pool (default train)")
    # BERTQA's settings: conf/model/cross_classifier.yaml; a flag given overrides its key
    bq.add_argument("--pretrained", default=None,
                    help="encoder of BERTQA (name, alias or folder; default: `pretrained` of "
                         f"{CLASSIFIER_CONF})")
    bq.add_argument("--steps", type=int, default=None,
                    help=f"training steps (default: training.steps of {CLASSIFIER_CONF})")
    bq.add_argument("--batch-size", type=int, default=None,
                    help="pairs per step, half negatives (default: training.batch_size)")
    bq.add_argument("--lr", type=float, default=None, help="default: optimizer.lr")
    bq.add_argument("--max-length", type=int, default=None,
                    help="tokens of question + sentence (default: max_length)")
    bq.add_argument("--passages", type=int, default=None,
                    help="paragraphs of the test sample (default: the paper's, "
                         "conf/tables/endx_table6.yaml)")
    bq.add_argument("--pairs", type=int, default=None,
                    help="QA pairs of the test sample (default: the paper's)")
    bq.add_argument("--passage-choice", default="most_questions",
                    choices=["most_questions", "random"],
                    help="which paragraphs make the test sample")
    bq.add_argument("--seed", type=int, default=0,
                    help="seed of the test sample and of BERTQA's training")
    bq.add_argument("--score-batch-size", type=int, default=None,
                    help="BERTQA pairs per forward pass at test time (default: "
                         "score_batch_size)")
    _common(bq)

    ts = add("tsne", help="Figure 4: t-SNE of questions sharing one answer")
    _models(ts)
    ts.add_argument("--answer", default=None, help="candidate id or exact sentence (default: "
                                                   "the answer with the most questions)")
    ts.add_argument("--questions", type=int, default=6, help="questions to show (default 6)")
    ts.add_argument("--perplexity", type=float, default=None,
                    help="default max(1, min(30, (n-1)/3)) for n points")
    ts.add_argument("--seed", type=int, default=0, help="seed of the t-SNE")
    ts.add_argument("--tag", default=None, help="suffix of the file names (figure4_TAG.*)")
    add_data_args(ts)
    _common(ts)

    tw = add("towers", help="SDE/ADE Figure 2: t-SNE of questions (question tower) "
                                       "and answers (answer tower), per model")
    _models(tw)
    tw.add_argument("--pairs", type=int, default=400,
                    help="QA pairs drawn at random (default 400, the paper's)")
    tw.add_argument("--k", type=int, default=10,
                    help="neighbours of the same-tower share (default 10)")
    tw.add_argument("--perplexity", type=float, default=None,
                    help="default max(1, min(30, (n-1)/3)) for n points")
    tw.add_argument("--seed", type=int, default=0, help="seed of the pairs drawn and the t-SNE")
    tw.add_argument("--tag", default=None, help="suffix of the file names (figure2_TAG.*)")
    tw.add_argument("--label", default=None,
                    help="what the models are (e.g. 'trained, CPU profile'), in the title")
    add_data_args(tw)
    _common(tw)

    ab = add("ablation", help="Table 5 from finished `rqa train` reports")
    _reports(ab)
    ab.add_argument("--reference", default=None, help="row the deltas are taken against")
    ab.add_argument("--title", default="Table 5: ablation of the GAM terms")
    _common(ab)

    sb = add("side-by-side", help="dual encoders vs ENDX from finished `rqa train` "
                                             "reports: test metrics, validation, time per "
                                             "method; or a sweep's settings (--sweep DIR)")
    _reports(sb, required=False)
    sb.add_argument("--sweep", default=None, metavar="DIR",
                    help="a folder of `rqa sweep` (runs/sweeps/NAME): one row per setting, "
                         "mean ± std over seeds (sweep_table.{md,json}, written into DIR "
                         "unless --output-dir is given)")
    sb.add_argument("--metrics", default=None,
                    help="--sweep: test metrics to show, comma-separated (default mrr,r@1,r@5; "
                         "e.g. p@1,mrr)")
    sb.add_argument("--last-logged", default=None, metavar="KEYS",
                    help="--sweep: also the last value each run logged of these keys, "
                         "comma-separated (its CSV log, e.g. train/dual_loss,train/gam_loss)")
    sb.add_argument("--merge", default=None, metavar="TABLE_JSON",
                    help="--sweep: pool the folder's runs into this earlier sweep_table.json "
                         "of the same sweep (e.g. the committed one, whose run folders are "
                         "on another machine); a seed in both is an error")
    sb.add_argument("--baseline", default=None, metavar="LABEL",
                    help="--sweep: a column testing each row against this row (its label): "
                         "difference of the first metric, 95%% interval, Holm-corrected p "
                         "(needs the runs' per_question.jsonl.gz)")
    sb.add_argument("--title", default=None,
                    help="default 'Dual encoders vs ENDX', or 'Sweep NAME' with --sweep")
    sb.add_argument("--tag", default=None, help="suffix of the file names (side_by_side_TAG.*)")
    _common(sb)
    sb.set_defaults(output_dir=None)


def classifier_overrides(args) -> dict:
    """The ``rqa analyze bertqa`` flags that were given, as settings over
    conf/model/cross_classifier.yaml.

    Args:
        args: the parsed options of ``rqa analyze bertqa``.
    """
    flat = {"pretrained": args.pretrained, "max_length": args.max_length,
            "score_batch_size": args.score_batch_size}
    out: dict = {k: v for k, v in flat.items() if v is not None}
    nested = {"training": {"steps": args.steps, "batch_size": args.batch_size},
              "optimizer": {"lr": args.lr}}
    for section, values in nested.items():
        given = {k: v for k, v in values.items() if v is not None}
        if given:
            out[section] = given
    return out


def _pool(args, dataset=None, pool=None):
    return load(args, dataset, pool)[0]


def _folder(option: str, given: str, folder: str) -> None:
    if not Path(folder).exists():
        raise InputFileError(option, given, "does not exist",
                             "pass the `checkpoint` folder printed by `rqa train`")


def _checked_models(args) -> list[tuple[str, str]]:
    """``--model NAME=DIR`` pairs, each folder checked to exist before any pool is read."""
    models = parse_named(args.model)
    for name, folder in models:
        _folder("--model", f"{name}={folder}", folder)
    return models


def run(args) -> dict:
    """Run the analysis chosen (``args.analysis``) and return its summary.

    Args:
        args: the parsed options.
    """
    if args.analysis == "one-to-many":
        from ..analysis.one_to_many import one_to_many_analysis

        models = _checked_models(args)
        return one_to_many_analysis(_pool(args), models,
                                    ks=range(1, args.max_k + 1), table_k=args.table_k,
                                    output_dir=args.output_dir, batch_size=args.batch_size,
                                    progress=not args.quiet)
    if args.analysis == "similarity":
        from ..analysis.similarity import resolve_run, similarity_analysis

        ckpt, model = args.endx_checkpoint, args.endx_model
        if args.endx_run:
            run_ckpt, run_model = resolve_run(args.endx_run)
            ckpt, model = ckpt or run_ckpt, model or run_model
        if not ckpt or not model:
            raise ConflictingOptionsError("similarity needs the ENDX model (fix: give "
                                          "--endx-run, or --endx-checkpoint and --endx-model)")
        for option, path in (("--endx-checkpoint", ckpt), ("--endx-model", model),
                             ("--dual-model", args.dual_model)):
            _folder(option, path, path)
        return similarity_analysis(_pool(args), endx_checkpoint=ckpt, endx_model=model,
                                   dual_model=args.dual_model, answer=args.answer,
                                   max_questions=args.max_questions,
                                   output_dir=args.output_dir, tag=args.tag)
    if args.analysis == "bertqa":
        from ..analysis.bertqa import bertqa_analysis

        models = _checked_models(args)
        return bertqa_analysis(
            _pool(args), _pool(args, args.train_dataset, args.train_pool),
            models, classifier=classifier_overrides(args),
            passages=args.passages, pairs=args.pairs, choice=args.passage_choice,
            seed=args.seed, output_dir=args.output_dir)
    if args.analysis == "tsne":
        from ..analysis.tsne import tsne_analysis

        models = _checked_models(args)
        return tsne_analysis(_pool(args), models, answer=args.answer,
                             num_questions=args.questions, perplexity=args.perplexity,
                             seed=args.seed, output_dir=args.output_dir, tag=args.tag)
    if args.analysis == "towers":
        from ..analysis.towers import towers_analysis

        models = _checked_models(args)
        return towers_analysis(_pool(args), models, pairs=args.pairs, k=args.k,
                               perplexity=args.perplexity, seed=args.seed,
                               output_dir=args.output_dir, tag=args.tag, label=args.label)
    if args.analysis == "ablation":
        from ..analysis.ablation import ablation_table
        from ..analysis.runs import load_reports

        return ablation_table(load_reports(parse_named(args.report, "report")),
                              output_dir=args.output_dir, reference=args.reference,
                              title=args.title)
    if args.analysis == "side-by-side":
        if bool(args.sweep) == bool(args.report):
            raise ConflictingOptionsError("side-by-side compares runs or a sweep's settings "
                                          "(fix: give --report NAME=RUN (repeated) or --sweep "
                                          "DIR)")
        if args.baseline and not args.sweep:
            raise ConflictingOptionsError("side-by-side: --baseline LABEL names a row of a "
                                          "sweep's table (fix: give --sweep DIR with it)")
        if args.merge and not args.sweep:
            raise ConflictingOptionsError("side-by-side: --merge TABLE_JSON pools into a "
                                          "sweep's table (fix: give --sweep DIR with it)")
        if args.sweep:
            from ..sweeps.table import sweep_table

            metrics = [m.strip() for m in args.metrics.split(",")] if args.metrics else None
            logged = [k.strip() for k in args.last_logged.split(",")] if args.last_logged else ()
            return sweep_table(args.sweep, output_dir=args.output_dir, metrics=metrics,
                               title=args.title, tag=args.tag, logged=logged,
                               merge=args.merge, baseline=args.baseline)
        from ..analysis.runs import load_reports, side_by_side_table

        return side_by_side_table(load_reports(parse_named(args.report, "report")),
                                  output_dir=args.output_dir or DEFAULT_OUTPUT_DIR,
                                  title=args.title or "Dual encoders vs ENDX", tag=args.tag)
    raise ValueError(f"unknown analysis {args.analysis!r}")
