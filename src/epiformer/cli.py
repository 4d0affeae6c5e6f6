"""The `epiformer` command line.

`epiformer init` starts a run of one's own data in a folder of its own (`epiformer.io.run_folder`);
`epiformer predict` scores new enhancer-promoter pairs with a trained model (see
`epiformer.scoring.predict` and docs/predict.md); `epiformer variants` scores the effect of VCF
variants in those pairs' windows (`epiformer.scoring.variants`, docs/variants.md); `epiformer tracks`
turns scores into genome browser tracks (`epiformer.scoring.tracks`, docs/tracks.md);
`epiformer summary` writes the summary of a run of some of the config's models
(`epiformer.evaluation.summary`); `epiformer crispr-export` writes a model's CRISPRi benchmark
predictions as its authors' pipeline reads them (`epiformer.scoring.crispr_comparison`). Each
subcommand is one `add_*` function that declares its arguments and sets `run`, the
function that carries it out (given the parsed arguments and the subcommand's parser, for
usage errors); heavy imports (torch) wait until a command runs, so `epiformer --help`
answers at once.

Exit status: 0 on success, 1 when an input is wrong (the message says which file and how
to fix it), 2 for a malformed command line.
"""

from __future__ import annotations

import argparse
import logging
import sys
from functools import partial

from epiformer import __version__
from epiformer.constants import BOOTSTRAP_UNIT, BOOTSTRAP_UNITS, DISTANCE_BINS, DISTANCE_STRATA
from epiformer.model.configs import SCORING_BATCH_SIZE

log = logging.getLogger(__name__)

PREDICT_EXAMPLE = """\
example:
  epiformer predict --model results/demo_a/linear --genome resources/demo/genome.fa \\
      --pairs resources/demo/demo_a.pairs.csv --out scores.tsv

Writes scores.tsv (pair_id, score; pair_id is the 0-based data row of the pairs file) and
scores.unscored.tsv (pair_id, line, reason for pairs that could not be scored, e.g. a
window that is mostly N). Windows are placed with the widths and settings the model was
trained with (model.json); labels in the pairs file are optional and ignored.
"""
VARIANTS_EXAMPLE = """\
example:
  epiformer variants --model results/demo_a/linear --genome resources/demo/genome.fa \\
      --pairs resources/demo/demo_a.pairs.csv --vcf variants.vcf.gz --out variants.tsv

Writes variants.tsv, one row per (pair, variant allele) in the pair's windows: pair_id,
chrom, pos (1-based, as in the VCF), ref, alt, element (enhancer, promoter or both),
ref_score (the pair's predict score), alt_score (with the allele), delta, id, line; and
variants.unscored.tsv (chrom, pos, ref, alt, line, reason) for alleles no pair scores:
outside every window, indels, symbolic alleles. Pairs are placed as predict places them.
"""


def fraction(text: str) -> float:
    value = float(text)
    if not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"{text} is not a fraction between 0 and 1")
    return value


def positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text} is not a positive integer")
    return value


def add_scoring_arguments(
    parser: argparse.ArgumentParser, out_help: str, unscored_help: str, vcf: bool = False
) -> None:
    """The arguments `predict` and `variants` share: model, genome, pairs, outputs, device, window settings;
    with `vcf`, also --vcf (variants)."""
    required = parser.add_argument_group("required arguments")
    required.add_argument(
        "--model",
        required=True,
        metavar="DIR",
        help="trained model folder, results/<cell>/<model> or results/pooled/<model> (model.json + model.safetensors,"
        " or an ensemble's model.json and its replicates/)",
    )
    required.add_argument(
        "--genome",
        required=True,
        metavar="FASTA",
        help="genome FASTA of the pairs' build, plain or bgzip-compressed (.fai made if missing)",
    )
    required.add_argument(
        "--pairs",
        required=True,
        metavar="FILE",
        help="pairs: TargetFinder CSV (header), BEDPE (tab-separated) or CRISPR benchmark TSV; .gz read transparently",
    )
    if vcf:
        required.add_argument(
            "--vcf", required=True, metavar="VCF", help="variants: VCF of the genome's build, plain or bgzip-compressed"
        )
    required.add_argument("--out", required=True, metavar="TSV", help=out_help)
    parser.add_argument(
        "--unscored",
        metavar="TSV",
        help=f"{unscored_help} (default: OUT with .unscored.tsv in place of .tsv)",
    )
    parser.add_argument(
        "--batch-size",
        type=positive_int,
        default=SCORING_BATCH_SIZE,
        metavar="N",
        help="pairs per forward pass (default: %(default)s, as in evaluation)",
    )
    parser.add_argument(
        "--device",
        choices=("cpu", "cuda"),
        default="cpu",
        help="where the model runs (default: %(default)s; cuda runs in bf16 autocast, as in "
        "training, so its scores differ slightly from the CPU's)",
    )
    parser.add_argument("--threads", type=positive_int, metavar="N", help="CPU threads for torch (default: torch's)")
    overrides = parser.add_argument_group(
        "window settings", "default: as recorded in model.json at training; change them only knowingly"
    )
    overrides.add_argument(
        "--edge",
        choices=("shift", "drop"),
        help="window past a chromosome end: shift it inside, or leave the pair unscored",
    )
    overrides.add_argument(
        "--max-n-fraction",
        type=fraction,
        metavar="F",
        help="leave pairs unscored whose enhancer or promoter window is more than F N",
    )
    overrides.add_argument(
        "--allow-trans",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="score pairs whose elements lie on different chromosomes",
    )
    parser.add_argument("--log", metavar="FILE", help="also write the log to FILE")


def add_predict(commands) -> None:
    parser = commands.add_parser(
        "predict",
        help="score enhancer-promoter pairs with a trained model",
        description="Score TargetFinder CSV, BEDPE or CRISPR benchmark pairs (labels optional) on any genome with\n"
        "a trained model, using the same windows and encoding as the workflow's evaluation.",
        epilog=PREDICT_EXAMPLE,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_scoring_arguments(
        parser, "scores to write: pair_id, score", "pairs that could not be scored, with line and reason"
    )
    parser.set_defaults(run=run_predict, command_parser=parser)


def add_variants(commands) -> None:
    parser = commands.add_parser(
        "variants",
        help="score the effect of VCF variants in pairs' windows",
        description="Score each VCF variant (SNVs and equal-length substitutions) in the enhancer or promoter\n"
        "window of a pair: the pair's score on the reference and with the variant, as `predict` scores it.",
        epilog=VARIANTS_EXAMPLE,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_scoring_arguments(
        parser,
        "rows to write: pair_id, chrom, pos, ref, alt, element, ref_score, alt_score, delta, id, line",
        "variants that could not be scored, with VCF line and reason",
        vcf=True,
    )
    parser.set_defaults(run=run_variants, command_parser=parser)


def set_up_torch(args: argparse.Namespace, parser: argparse.ArgumentParser) -> None:
    import torch

    if args.device == "cuda" and not torch.cuda.is_available():
        parser.error("--device cuda: no CUDA GPU is visible; use --device cpu")
    if args.threads:
        torch.set_num_threads(args.threads)


def window_overrides(args: argparse.Namespace) -> dict:
    return {"edge": args.edge, "max_n_fraction": args.max_n_fraction, "allow_trans": args.allow_trans}


def run_scoring(args: argparse.Namespace, parser: argparse.ArgumentParser, score, *errors: type[Exception]) -> int:
    """Run a scoring command's `score` with the shared options; an input error is one log line and exit status 1."""
    set_up_torch(args, parser)
    try:
        score(unscored_path=args.unscored, batch_size=args.batch_size, device=args.device, **window_overrides(args))
    except errors as error:
        log.error("%s", error)
        return 1
    return 0


def run_predict(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    from epiformer.data.chromosomes import GenomeError
    from epiformer.data.pairs import PairsError
    from epiformer.inference.trained_model import ModelError
    from epiformer.scoring.predict import predict_pairs

    score = partial(predict_pairs, args.model, args.genome, args.pairs, args.out)
    return run_scoring(args, parser, score, ModelError, GenomeError, PairsError)


def run_variants(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    from epiformer.data.chromosomes import GenomeError
    from epiformer.data.pairs import PairsError
    from epiformer.inference.trained_model import ModelError
    from epiformer.io.vcf import VcfError
    from epiformer.scoring.variants import score_variants

    score = partial(score_variants, args.model, args.genome, args.pairs, args.vcf, args.out)
    return run_scoring(args, parser, score, ModelError, GenomeError, PairsError, VcfError)


TRACKS_EXAMPLE = """\
example:
  epiformer tracks --pairs candidates.bedpe --scores scores.tsv --out-prefix tracks/candidates \\
      --genome hg19.fa

Writes tracks/candidates.bedpe (IGV: File > Load from File) and tracks/candidates.interact.bed
(UCSC: custom track upload), and with --genome and UCSC bedToBigBed on PATH
tracks/candidates.interact.bb (bigInteract, for a track hub or bigDataUrl) and the autoSql
tracks/candidates.interact.as beside it. Only scored pairs get a row. See docs/tracks.md.
"""


def add_tracks(commands) -> None:
    parser = commands.add_parser(
        "tracks",
        help="write scored pairs as genome browser tracks (BEDPE, UCSC interact, bigInteract)",
        description="Write the pairs of a scores table (epiformer predict's scores.tsv, or a workflow\n"
        "predictions.tsv) as BEDPE and UCSC interact tracks, at the pairs file's coordinates.",
        epilog=TRACKS_EXAMPLE,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    required = parser.add_argument_group("required arguments")
    required.add_argument(
        "--pairs",
        required=True,
        metavar="FILE",
        help="the pairs file that was scored: TargetFinder CSV, BEDPE or CRISPR benchmark; .gz read transparently",
    )
    required.add_argument(
        "--scores",
        required=True,
        metavar="TSV",
        help="pair_id, score (probability) and optionally label: scores.tsv of epiformer predict or predictions.tsv",
    )
    required.add_argument(
        "--out-prefix",
        required=True,
        metavar="PREFIX",
        help="write PREFIX.bedpe and PREFIX.interact.bed (and PREFIX.interact.bb with --genome)",
    )
    parser.add_argument(
        "--genome",
        metavar="FASTA",
        help="genome FASTA with its .fai (or a .fai or chrom.sizes file): checks coordinates, and makes bigInteract "
        "when UCSC bedToBigBed is on PATH",
    )
    parser.add_argument(
        "--name", default="epiformer", help="track name, and the interact `exp` field (default: %(default)s)"
    )
    parser.add_argument(
        "--no-track-line",
        dest="track_line",
        action="store_false",
        help="leave out the `track type=interact` line of the interact file (keep it for a UCSC custom track upload)",
    )
    parser.add_argument("--log", metavar="FILE", help="also write the log to FILE")
    parser.set_defaults(run=run_tracks, command_parser=parser)


def run_tracks(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    from epiformer.data.chromosomes import GenomeError
    from epiformer.data.pairs import PairsError
    from epiformer.scoring.tracks import TracksError, write_tracks

    try:
        write_tracks(
            args.pairs,
            args.scores,
            f"{args.out_prefix}.bedpe",
            f"{args.out_prefix}.interact.bed",
            genome=args.genome,
            track_name=args.name,
            with_track_line=args.track_line,
            pairs_named_in="the --pairs option",
        )
    except (TracksError, PairsError, GenomeError) as error:
        log.error("%s", error)
        return 1
    return 0


def add_summary(commands) -> None:
    parser = commands.add_parser(
        "summary",
        help="write summary.tsv of a results folder that holds some of the config's models",
        description="Write summary.tsv, summary.md, paired_comparison.tsv and distance_bins.tsv (as the workflow's\n"
        "summary rule does)\n"
        "from the {cell}/{model}/metrics.json and predictions.tsv a results folder holds: for a run of some\n"
        "of the config's models, such as `make real-random`. Oracle columns stay empty (no truth table).",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "results", metavar="RESULTS", help="a workflow's results/ folder; the files are written into it"
    )
    parser.add_argument(
        "--models", nargs="+", metavar="NAME", help="the models and baselines to include, in this order (default: all)"
    )
    parser.add_argument(
        "--bootstrap", type=positive_int, default=1000, help="paired bootstrap resamples (default: %(default)s)"
    )
    parser.add_argument("--seed", type=int, default=0, help="the bootstrap's seed (default: %(default)s)")
    parser.add_argument(
        "--bootstrap-unit",
        choices=BOOTSTRAP_UNITS,
        default=BOOTSTRAP_UNIT,
        help="what a resample draws whole, as evaluate.bootstrap_unit: the pairs of a promoter, pairs joined by "
        "any shared element, or each pair (default: %(default)s)",
    )
    parser.add_argument(
        "--distance-bins",
        type=positive_int,
        default=DISTANCE_BINS,
        help="distance quantile bins of the test pairs for binned metrics (default: %(default)s)",
    )
    parser.add_argument(
        "--distance-strata",
        type=positive_int,
        default=DISTANCE_STRATA,
        help="distance quantile strata for the matched AUROC (default: %(default)s)",
    )
    parser.set_defaults(run=run_summary, command_parser=parser)


def run_summary(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    from pathlib import Path

    from epiformer.evaluation.selection import SELECTION_TSV, chosen_names, read_selection
    from epiformer.evaluation.summary import ResultsError, results_in_folder, write_summary

    folder = Path(args.results)
    try:
        results = results_in_folder(folder, args.models)
    except ResultsError as error:
        log.error("%s", error)
        return 1
    selection = folder / SELECTION_TSV  # the run's choice on validation, where the workflow made one
    if not selection.is_file():
        selection = None
    elif not set(chosen_names(read_selection(selection))) <= {result.model for result in results}:
        log.warning("%s chose a model not summarised here (--models); the summary marks no choice", selection)
        selection = None
    write_summary(
        results,
        folder / "summary.tsv",
        folder / "summary.md",
        paired_path=folder / "paired_comparison.tsv",
        resamples=args.bootstrap,
        seed=args.seed,
        distance_bins_path=folder / "distance_bins.tsv",
        distance_bins=args.distance_bins,
        distance_strata=args.distance_strata,
        bootstrap_unit=args.bootstrap_unit,
        selection=selection,
    )
    log.info(
        "%s: summary.tsv, summary.md, paired_comparison.tsv, distance_bins.tsv of %d results", folder, len(results)
    )
    return 0


def add_crispr_export(commands) -> None:
    parser = commands.add_parser(
        "crispr-export",
        help="write a model's CRISPRi benchmark predictions in EngreitzLab/CRISPR_comparison's format",
        description="Write a model's (or baseline's) test predictions of a run on ENCODE-rE2G's CRISPR benchmark\n"
        "in the format of its authors' pipeline (EngreitzLab/CRISPR_comparison): crispr_comparison.tsv.gz\n"
        "and crispr_comparison.pred_config.txt beside predictions.tsv. Run from the run's folder (the pairs\n"
        "file is read at the path windows_stats.json records). See docs/results/crispri.md.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "model_dirs", nargs="+", metavar="MODEL_DIR", help="results/{cell}/{model}/ folders of a finished run"
    )
    parser.set_defaults(run=run_crispr_export, command_parser=parser)


def run_crispr_export(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    from epiformer.scoring.crispr_comparison import ExportError, export_crispr_comparison
    from epiformer.scoring.tracks import TracksError

    try:
        for model_dir in args.model_dirs:
            export_crispr_comparison(model_dir)
    except (ExportError, TracksError) as error:
        log.error("%s", error)
        return 1
    return 0


INIT_EXAMPLE = """\
example:
  epiformer init runs/k562 --genome hg19=/data/hg19.fa --pairs K562=/data/K562.pairs.csv \\
      --val chr7 --test chr8
  cd runs/k562 && snakemake -s /path/to/epiformer/Snakefile --cores all

Writes runs/k562/config/config.yaml (the genome, the windows, the held-out chromosomes; every
other key at its default) and config/samples.tsv (a row a --pairs). The run writes resources/,
results/ and logs/ in that folder; the checkout's own config runs the demo and stays as it is.
"""


def key_value(text: str) -> tuple[str, str]:
    name, separator, value = text.partition("=")
    if not separator or not name or not value:
        raise argparse.ArgumentTypeError(f"{text!r} is not NAME=PATH")
    return name, value


def add_init(commands) -> None:
    parser = commands.add_parser(
        "init",
        help="start a run of your own genome and pairs in a folder of its own",
        description="Write a run folder's config and sample sheet for your genome and cell lines, apart from\n"
        "the checkout's demo config.",
        epilog=INIT_EXAMPLE,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("folder", help="the run's folder (made if missing)")
    parser.add_argument("--genome", required=True, type=key_value, metavar="NAME=FASTA", help="the genome")
    parser.add_argument(
        "--pairs", required=True, action="append", type=key_value, metavar="CELL=PATH",
        help="a cell line's pairs (TargetFinder CSV, BEDPE or CRISPR benchmark TSV); repeat for each",
    )  # fmt: skip
    parser.add_argument("--val", nargs="+", default=[], metavar="CHROM", help="validation chromosomes")
    parser.add_argument("--test", nargs="+", default=[], metavar="CHROM", help="test chromosomes")
    parser.set_defaults(run=run_init, command_parser=parser)


def run_init(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    from epiformer.io.run_folder import init_run_folder, workflow_snakefile

    cells = [cell for cell, _ in args.pairs]
    if len(set(cells)) < len(cells):
        parser.error(f"--pairs names a cell line twice: {', '.join(sorted({c for c in cells if cells.count(c) > 1}))}")
    try:
        written = init_run_folder(args.folder, args.genome, dict(args.pairs), args.val, args.test)
    except ValueError as error:
        log.error("%s", error)
        return 1
    log.info("Wrote %s", ", ".join(str(path) for path in written))
    if not (args.val and args.test):
        log.warning("Name the held-out chromosomes (--val, --test, or split: in the config) before the run.")
    log.info("Next: cd %s && snakemake -s %s --cores all -n", args.folder, workflow_snakefile())
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="epiformer",
        description="Enhancer-promoter interaction prediction with a linear-attention Transformer. The workflow "
        "runs with Snakemake (see README.md); these commands work with its results.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    parser.add_argument("-q", "--quiet", action="store_true", help="log warnings and errors only")
    commands = parser.add_subparsers(title="commands", dest="command", required=True, metavar="COMMAND")
    add_init(commands)
    add_predict(commands)
    add_variants(commands)
    add_tracks(commands)
    add_summary(commands)
    add_crispr_export(commands)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    if not (sys.argv[1:] if argv is None else argv):  # a bare `epiformer`: the commands and what each does
        parser.print_help()
        return 0
    args = parser.parse_args(argv)
    from epiformer.io.runlog import setup_logging

    setup_logging(getattr(args, "log", None), logging.WARNING if args.quiet else logging.INFO)
    return args.run(args, args.command_parser)


if __name__ == "__main__":
    sys.exit(main())
