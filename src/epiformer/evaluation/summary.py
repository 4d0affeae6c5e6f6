"""The summary table: one row per (cell line, model or baseline) with metrics, intervals, cost.

`summary.tsv` columns: cell_line, model, kind (transformer or baseline), attention (linear,
softmax; empty for baselines), input (what the model reads: elements, the two windows, or
span, everything from one window to the other; elements for baselines), between (a span
model's between-sequence: sequence, or shuffled for its length control), reads (what the result
reads, `+`-joined: sequence, distance, element_rates; a span model reads distance as its length),
pooled (fitted on every cell line at once: a pooled model or baseline), auroc, auroc_lo,
auroc_hi, auprc, auprc_lo, auprc_hi, f1, mcc, balanced_accuracy, n_test, positives,
bootstrap_unit and bootstrap_groups (what every interval of the row resampled whole,
`evaluate.bootstrap_unit`: promoter, element or pair, and how many of them the test pairs
form), split_mode, parameters (fitted coefficients for a baseline), train_seconds, tokens_per_s,
device, peak_memory_mb (the training process's peak resident memory, or the GPU's peak
allocation), epochs_trained (fewer than train.epochs when early stopping or the time budget
train.max_minutes ended training; these five empty for baselines), oracle_auroc (empty unless the sample sheet
names a truth table, as the demo does: the AUROC of the true interaction probabilities on
the same test pairs), element_ceiling_auroc (the same for the best score the two element
windows allow, when the truth table has `p_elements`, as the long demo's does), pairs_in,
dropped_pairs and dropped_for_span (from the cell line's windows_stats.json: the pairs the
windows stage read, those it dropped for any reason, and those of them dropped because a
span model could not read their span: longer than `windows.max_span`, or across
chromosomes; the same for every model and baseline of the cell line, since all are scored on
the pairs kept; empty without the stats). Then, for
each baseline b (in the order of the results), the paired comparison of a Transformer with
b on the same cell line's test pairs: auroc_diff_b, auroc_diff_b_lo, auroc_diff_b_hi, auprc_diff_b, auprc_diff_b_lo,
auprc_diff_b_hi (model minus baseline and its paired bootstrap 95% interval; empty on
baseline rows). Then the measures within distance (`evaluation.distance`; empty without the
cell line's windows.tsv): matched_auroc, matched_auroc_lo, matched_auroc_hi (each positive
against the negatives of its own distance stratum), matched_auroc_diff_distance[_lo, _hi]
(minus the distance baseline's, paired bootstrap; every row but the distance baseline's),
binned_auroc_mean and binned_auprc_mean (over the distance bins that hold both classes). Last,
peer_baseline and peer_verdict (models only; `verdicts.with_peer_columns`): the strongest baseline (by
test AUROC, pooled or not) that reads nothing the model does not, and "above", "below", "tie: interval", "tie:
replicates" or "no interval" against it, from the paired interval and the replicates' spread;
chosen_on_validation (the model results/selection.tsv put forward, `evaluation.selection`; empty
without it).
Before the paired columns, REPLICATE_COLUMNS (models only; `train.replicates`): replicates,
replicate_auroc_mean, replicate_auroc_sd, replicate_auprc_mean, replicate_auprc_sd (sd empty
for one replicate), replicate_aurocs and replicate_auprcs (each replicate's, `;`-joined); the
row's auroc and auprc are then the ensemble's.

`distance_bins.tsv`: one row per (cell line, model or baseline, distance bin): cell_line,
model, bin, distance_low, distance_high, n_test, positives, auroc, auprc.

`paired_comparison.tsv` holds the same comparisons in long form, one row per (cell line,
model, baseline, metric): cell_line, model, baseline, metric (auroc, auprc), model_value,
baseline_value, difference (model_value - baseline_value), lo, hi, excludes_zero (the
interval lies wholly above or below 0), n_test, positives, resamples (drawn),
resamples_used (those holding both classes), seed, bootstrap_unit, bootstrap_groups. Each
resample draws the test pairs once (whole groups of them: pairs that share a promoter, say, are
drawn together, `metrics.dependence_groups`) and scores both the model and the baseline on
them (`metrics.paired_bootstrap_difference`), so the interval is that of the difference itself;
two unpaired intervals that overlap say little about it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
from sklearn.metrics import roc_auc_score

from epiformer.constants import BASELINE_READS, DISTANCE_BINS, DISTANCE_STRATA, baseline_of
from epiformer.evaluation.distance import MATCHED_COLUMNS, distance_evaluation, with_distances
from epiformer.evaluation.metrics import (
    fast_average_precision,
    fast_roc_auc,
    group_count,
    groups_of_pairs,
    paired_bootstrap_difference,
)
from epiformer.evaluation.selection import chosen_names, read_selection, selection_markdown
from epiformer.evaluation.summary_page import PAIRED_METRIC_NAMES, to_markdown, with_reference
from epiformer.evaluation.verdicts import (
    REPLICATE_DIGITS,
    with_peer_columns,
)
from epiformer.io.files import atomic_write_text
from epiformer.io.metrics_file import METRICS_JSON, metrics_path, read_metrics
from epiformer.io.model_description import description_path, read_description, reads_spans
from epiformer.io.predictions import read_predictions
from epiformer.io.windows_stats import read_windows_stats, windows_stats_path
from epiformer.model.configs import length_control_of

# sklearn's values (tested equal), fast enough for models x baselines x 1000 resamples
PAIRED_METRICS = dict(zip(PAIRED_METRIC_NAMES, (fast_roc_auc, fast_average_precision)))
LENGTH_CONTROL = "length_control"  # the summary's paired columns of a span model against its length control


@dataclass
class ModelResult:
    """The files of one evaluated (cell line, model or baseline) that its summary row is read from."""

    cell_line: str
    model: str
    metrics: Path
    description: Path | None  # model.json; None for a baseline
    predictions: Path
    truth: Path | None = None
    windows_stats: Path | None = None  # the cell line's windows_stats.json: what the windows stage dropped
    windows: Path | None = None  # the cell line's windows.tsv: each pair's distance, for the within-distance measures


SPAN_DROP_REASONS = ("span_longer_than_max_span", "span_across_chromosomes")  # data.windows' reasons


def dropped_counts(windows_stats: Path | None) -> dict:
    """pairs_in, dropped_pairs and dropped_for_span of a windows_stats.json (all None without one)."""
    if windows_stats is None:
        return {"pairs_in": None, "dropped_pairs": None, "dropped_for_span": None}
    stats = read_windows_stats(windows_stats)
    dropped = stats.get("dropped", {})
    return {
        "pairs_in": stats["pairs_in"],
        "dropped_pairs": stats["pairs_in"] - stats["pairs_kept"],
        "dropped_for_span": sum(int(dropped.get(reason, 0)) for reason in SPAN_DROP_REASONS),
    }


def oracle_auroc(predictions: Path, truth: Path) -> float:
    """AUROC of the generator's true probabilities (`p_interact`) on the evaluated pairs."""
    frame = read_predictions(predictions).merge(pd.read_csv(truth, sep="\t")[["pair_id", "p_interact"]])
    return float(roc_auc_score(frame["label"], frame["p_interact"]))


def element_ceiling_auroc(predictions: Path, truth: Path) -> float | None:
    """AUROC of the best score the two element windows allow (`p_elements`, the long demo's truth), or None."""
    truth_frame = pd.read_csv(truth, sep="\t")
    if "p_elements" not in truth_frame.columns:
        return None
    frame = read_predictions(predictions).merge(truth_frame[["pair_id", "p_elements"]])
    return float(roc_auc_score(frame["label"], frame["p_elements"]))


def summary_row(result: ModelResult) -> dict:
    """A summary.tsv row (module docstring) from a result's metrics.json and, for a model, its model.json."""
    metrics = read_metrics(result.metrics)
    description = result_description(result)
    return {
        "cell_line": result.cell_line,
        "model": result.model,
        "kind": "transformer" if description else "baseline",
        "attention": description["model"]["attention"] if description else None,
        # Baselines read the element windows (and their distance); models say what they read.
        "input": description["model"]["input"] if description else "elements",
        # A span model's between-sequence: the genome's, or shuffled (its length control); empty otherwise.
        "between": description["model"].get("between", "sequence")
        if description and reads_spans(description)
        else None,
        "reads": "+".join(reads(result.model, description)),
        "pooled": _pooled(result, metrics),
        "auroc": metrics["auroc"],
        "auroc_lo": metrics["auroc_ci95"][0],
        "auroc_hi": metrics["auroc_ci95"][1],
        "auprc": metrics["auprc"],
        "auprc_lo": metrics["auprc_ci95"][0],
        "auprc_hi": metrics["auprc_ci95"][1],
        "f1": metrics.get("f1"),
        "mcc": metrics.get("mcc"),
        "balanced_accuracy": metrics.get("balanced_accuracy"),
        "n_test": metrics["n_test"],
        "positives": metrics["positives"],
        # What the intervals resampled whole (metrics.dependence_groups), and how many of them the test pairs form.
        "bootstrap_unit": metrics.get("bootstrap_unit", "pair"),
        "bootstrap_groups": metrics.get("bootstrap_groups", metrics["n_test"]),
        "split_mode": metrics["split"]["mode"] + (" (leak-prone)" if metrics["split"]["leak_prone"] else ""),
        **(_cost(description) if description else _baseline_cost(metrics)),
        "oracle_auroc": oracle_auroc(result.predictions, result.truth) if result.truth else None,
        "element_ceiling_auroc": element_ceiling_auroc(result.predictions, result.truth) if result.truth else None,
        **dropped_counts(result.windows_stats),
        **replicate_columns(metrics, description),
    }


def reads(name: str, description: dict | None) -> tuple[str, ...]:
    """What a result reads: a model its elements' sequence, and distance when given it (`distance: true`) or when
    it reads spans (a span's length is its distance); a baseline its features (BASELINE_READS)."""
    if description is None:
        return BASELINE_READS.get(baseline_of(name) or "", ())  # an unknown baseline is no model's peer
    model = description["model"]
    return ("sequence", "distance") if model.get("distance") or reads_spans(description) else ("sequence",)


def _pooled(result: ModelResult, metrics: dict) -> bool:
    """Whether the result was fitted on every cell line at once: a pooled model (its model.json in
    results/pooled/{model}/) or a pooled baseline."""
    if result.description:
        return Path(result.description).parent.parent.name == "pooled"
    return bool(metrics.get("baseline", {}).get("pooled", False))


REPLICATE_COLUMNS = [
    "replicates",
    "replicate_auroc_mean",
    "replicate_auroc_sd",
    "replicate_auprc_mean",
    "replicate_auprc_sd",
    "replicate_aurocs",
    "replicate_auprcs",
]


def replicate_columns(metrics: dict, description: dict | None) -> dict:
    """REPLICATE_COLUMNS of a model: its replicates' count, each one's AUROC and AUPRC (`;`-joined, by replicate)
    and their mean and sd; one model counts as 1 replicate (sd empty); empty for a baseline."""
    if description is None:
        return dict.fromkeys(REPLICATE_COLUMNS)
    replicates = metrics.get("replicates") or [{"auroc": metrics["auroc"], "auprc": metrics["auprc"]}]
    columns = {"replicates": len(replicates)}
    for metric in ("auroc", "auprc"):  # evaluate's mean and sd (evaluation.evaluate.replicate_metrics)
        columns[f"replicate_{metric}_mean"] = metrics.get(f"replicate_{metric}_mean", metrics[metric])
        columns[f"replicate_{metric}_sd"] = metrics.get(f"replicate_{metric}_sd")
    for metric in ("auroc", "auprc"):
        columns[f"replicate_{metric}s"] = ";".join(
            f"{replicate[metric]:.{REPLICATE_DIGITS}f}" for replicate in replicates
        )
    return columns


def _cost(description: dict) -> dict:
    keys = ("parameters", "train_seconds", "tokens_per_s", "device", "peak_memory_mb", "epochs_trained")
    return {key: description[key] for key in keys}


def _baseline_cost(metrics: dict) -> dict:
    baseline = metrics.get("baseline", {})
    # No timing: metrics.json stays byte-identical between runs.
    return {
        "parameters": baseline.get("features", 0) + 1,
        "train_seconds": None,
        "tokens_per_s": None,
        "device": None,
        "peak_memory_mb": None,
        "epochs_trained": None,
    }


PAIRED_COLUMNS = [
    "cell_line",
    "model",
    "baseline",
    "reference",  # what `baseline` is: a "baseline", or the model's "length_control" (a span model's)
    "metric",
    "model_value",
    "baseline_value",
    "difference",
    "lo",
    "hi",
    "excludes_zero",
    "n_test",
    "positives",
    "resamples",
    "resamples_used",
    "seed",
    "bootstrap_unit",  # what a draw resamples whole: pair, promoter or element (metrics.dependence_groups)
    "bootstrap_groups",  # how many of them the test pairs form
]


class WindowsTables:
    """Each cell line's windows.tsv, read once: the distances and the groups of pairs the bootstraps resample."""

    def __init__(self):
        self.tables: dict[Path, pd.DataFrame] = {}

    def table(self, path) -> pd.DataFrame:
        path = Path(path)
        if path not in self.tables:
            self.tables[path] = pd.read_csv(path, sep="\t")
        return self.tables[path]

    def groups(self, result: ModelResult, pair_ids, unit: str) -> np.ndarray | None:
        """`metrics.groups_of_pairs` of these pairs of `result`'s cell line; None (pairs) for unit pair or
        without windows.tsv."""
        if unit == "pair" or result.windows is None:
            return None
        return groups_of_pairs(self.table(result.windows), pair_ids, unit, str(result.windows))


def paired_predictions(model_predictions, baseline_predictions) -> pd.DataFrame:
    """Two predictions.tsv files side by side: pair_id, label, score_model, score_baseline, by pair_id.

    Raises ValueError naming both files unless they hold the same pair_ids, each once, with
    the same labels: a paired comparison needs identical test pairs.
    """
    frames = [pd.read_csv(path, sep="\t") for path in (model_predictions, baseline_predictions)]
    names = f"{model_predictions} and {baseline_predictions}"
    fix = "evaluate both on the test split of the same results/{cell}/shards (re-run the older one with --forcerun)"
    for path, frame in zip((model_predictions, baseline_predictions), frames):
        if frame["pair_id"].duplicated().any():
            raise ValueError(
                f"{path}: pair_id {frame['pair_id'][frame['pair_id'].duplicated()].iloc[0]} appears twice; "
                f"cannot pair it with the other file of {names}."
            )
    only = [sorted(set(a["pair_id"]) - set(b["pair_id"])) for a, b in (frames, frames[::-1])]
    if only[0] or only[1]:
        raise ValueError(
            f"{names} do not hold the same test pairs: {len(only[0])} pair_id(s) only in the first "
            f"(e.g. {only[0][:3]}), {len(only[1])} only in the second (e.g. {only[1][:3]}); {fix}."
        )
    both = frames[0].merge(frames[1], on="pair_id", suffixes=("_model", "_baseline")).sort_values("pair_id")
    differ = both["label_model"] != both["label_baseline"]
    if differ.any():
        raise ValueError(
            f"{names} give different labels to {int(differ.sum())} test pair(s) "
            f"(e.g. pair_id {both['pair_id'][differ].iloc[0]}); {fix}."
        )
    return both.rename(columns={"label_model": "label"}).drop(columns="label_baseline").reset_index(drop=True)


def paired_comparison(
    results: list[ModelResult], resamples: int = 1000, seed: int = 0, unit: str = "pair"
) -> pd.DataFrame:
    """Every Transformer against every baseline of its cell line: the long table of `paired_comparison.tsv`.

    One row per (cell line, model, baseline, metric) with the columns of PAIRED_COLUMNS (see
    the module docstring); `resamples`, `seed` and `unit` as `evaluate.bootstrap`, `evaluate.seed`
    and `evaluate.bootstrap_unit` (whole groups of pairs a draw, from the model's windows.tsv).
    """
    rows, windows = [], WindowsTables()
    for cell in dict.fromkeys(result.cell_line for result in results):
        here = [result for result in results if result.cell_line == cell]
        baselines = [result for result in here if not result.description]
        for model in (result for result in here if result.description):
            control = length_control_result(here, model)
            references = [(b, "baseline") for b in baselines] + ([(control, "length_control")] if control else [])
            for baseline, reference in references:
                pairs = paired_predictions(model.predictions, baseline.predictions)
                groups = windows.groups(model, pairs["pair_id"], unit)
                labels = pairs["label"].to_numpy(int)
                model_scores = pairs["score_model"].to_numpy(float)
                baseline_scores = pairs["score_baseline"].to_numpy(float)
                for metric, score in PAIRED_METRICS.items():
                    paired = paired_bootstrap_difference(
                        labels, model_scores, baseline_scores, score, resamples, seed, groups
                    )
                    rows.append(
                        {
                            "cell_line": cell,
                            "model": model.model,
                            "baseline": baseline.model,
                            "reference": reference,
                            "metric": metric,
                            "model_value": float(score(labels, model_scores)),
                            "baseline_value": float(score(labels, baseline_scores)),
                            "difference": paired["difference"],
                            "lo": paired["lo"],
                            "hi": paired["hi"],
                            "excludes_zero": bool(paired["lo"] > 0 or paired["hi"] < 0),
                            "n_test": len(labels),
                            "positives": int(labels.sum()),
                            "resamples": resamples,
                            "resamples_used": paired["resamples_used"],
                            "seed": seed,
                            "bootstrap_unit": unit if groups is not None else "pair",
                            "bootstrap_groups": group_count(groups, len(labels)),
                        }
                    )
    return pd.DataFrame(rows, columns=PAIRED_COLUMNS)


def length_control_result(results: list[ModelResult], model: ModelResult) -> ModelResult | None:
    """Among one cell line's `results`, the length control of span model `model` (`configs.length_control_of`)."""
    settings = {result.model: result_description(result)["model"] for result in results if result.description}
    control = length_control_of(settings, model.model)
    return next((result for result in results if result.model == control), None)


def result_description(result: ModelResult) -> dict | None:
    """A result's model.json; None for a baseline."""
    return read_description(Path(result.description).parent) if result.description else None


def with_paired_columns(table: pd.DataFrame, paired: pd.DataFrame) -> pd.DataFrame:
    """`table` (summary rows) with {metric}_diff_{baseline}[_lo, _hi] for each baseline row's model, and
    {metric}_diff_length_control[_lo, _hi] for span models with a length control, from `paired`.

    Values fill the rows of Transformer models; baseline rows, and comparisons `paired` lacks, stay NaN.
    """
    paired = with_reference(paired)
    values = {}
    for row in paired.itertuples():
        reference = row.baseline if row.reference == "baseline" else LENGTH_CONTROL
        for suffix, value in (("", row.difference), ("_lo", row.lo), ("_hi", row.hi)):
            values[(row.cell_line, row.model, f"{row.metric}_diff_{reference}{suffix}")] = value
    table = table.copy()
    references = list(dict.fromkeys(table.loc[table["kind"] == "baseline", "model"]))
    if (paired["reference"] == "length_control").any():
        references.append(LENGTH_CONTROL)
    for baseline in references:
        for metric in PAIRED_METRICS:
            for suffix in ("", "_lo", "_hi"):
                column = f"{metric}_diff_{baseline}{suffix}"
                table[column] = [
                    values.get((cell, model, column), np.nan) for cell, model in zip(table["cell_line"], table["model"])
                ]
    return table


def with_distance_columns(
    table: pd.DataFrame,
    results: list[ModelResult],
    distance_bins: int,
    distance_strata: int,
    resamples: int,
    seed: int,
    unit: str = "pair",
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """`table` with MATCHED_COLUMNS (`evaluation.distance`) for every result whose windows.tsv is known, and the
    long table of their distance bins (empty, and the columns NaN, without windows.tsv); intervals resample
    whole groups of `unit`."""
    windows = WindowsTables()
    frames = {}
    for result in results:
        if result.windows is None:
            continue
        predictions = read_predictions(result.predictions)
        frame = with_distances(predictions, windows.table(result.windows), result.predictions)
        groups = windows.groups(result, frame["pair_id"], unit)
        frames[(result.cell_line, result.model)] = frame if groups is None else frame.assign(group=groups)
    columns, bins_table = distance_evaluation(frames, distance_bins, distance_strata, resamples, seed)
    table = table.copy()
    for column in MATCHED_COLUMNS:
        table[column] = [
            columns.get((cell, model), {}).get(column, np.nan)
            for cell, model in zip(table["cell_line"], table["model"])
        ]
    return table, bins_table


SUMMARY_KEY = ("cell_line", "model", "kind")  # a summary.tsv's rows: one per (cell line, model or baseline)


def read_summary(path: str | Path) -> pd.DataFrame:
    """A summary.tsv as `write_summary` wrote it (the plots and the results pages read it through here); a
    ValueError naming the file and the fix when it is not one."""
    try:
        table = pd.read_csv(path, sep="\t")
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as error:
        raise ValueError(f"{path}: not a readable summary.tsv ({error}); run the summary rule again.") from error
    missing = [column for column in SUMMARY_KEY if column not in table]
    if missing:
        raise ValueError(
            f"{path}: no {', '.join(missing)} column: not a summary.tsv written by epiformer's summary "
            "(rule summary, or `epiformer summary`); write it again."
        )
    return table


def write_summary(
    results: list[ModelResult],
    tsv_path,
    markdown_path,
    paired_path=None,
    resamples: int = 1000,
    seed: int = 0,
    distance_bins_path=None,
    distance_bins: int = DISTANCE_BINS,
    distance_strata: int = DISTANCE_STRATA,
    bootstrap_unit: str = "pair",
    selection=None,
) -> pd.DataFrame:
    """Write summary.tsv, summary.md and, given their paths, paired_comparison.tsv and distance_bins.tsv.

    `selection`: the run's selection.tsv (`evaluation.selection`), which marks the model chosen on
    validation (column chosen_on_validation; empty without it) and adds its section to summary.md.

    `resamples`, `seed` and `bootstrap_unit` drive the paired bootstrap (the workflow passes
    `evaluate.bootstrap`, `evaluate.seed` and `evaluate.bootstrap_unit`, as for each model's own
    intervals); `distance_bins` and `distance_strata` are `evaluate.distance_bins` and
    `evaluate.distance_strata`. Returns the summary table.
    """
    paired = paired_comparison(results, resamples, seed, bootstrap_unit)
    table = with_paired_columns(pd.DataFrame([summary_row(r) for r in results]), paired)
    table, bins_table = with_distance_columns(
        table, results, distance_bins, distance_strata, resamples, seed, bootstrap_unit
    )
    table = with_peer_columns(table)
    chosen = None if selection is None else read_selection(selection)
    table["chosen_on_validation"] = np.nan if chosen is None else table["model"].isin(chosen_names(chosen))
    markdown = to_markdown(table, paired, [] if chosen is None else selection_markdown(chosen, table))
    atomic_write_text(Path(tsv_path), table.to_csv(sep="\t", index=False, float_format="%.4g"))
    atomic_write_text(Path(markdown_path), markdown)
    if paired_path is not None:
        atomic_write_text(Path(paired_path), paired.to_csv(sep="\t", index=False, float_format="%.4g"))
    if distance_bins_path is not None:
        atomic_write_text(Path(distance_bins_path), bins_table.to_csv(sep="\t", index=False, float_format="%.4g"))
    return table


class ResultsError(ValueError):
    """A results folder that holds no evaluated model or baseline, or not the ones asked for."""


def results_in_folder(results: Path, models: list[str] | None = None) -> list[ModelResult]:
    """The evaluated results of a workflow's `results/` folder: every {cell}/{model}/metrics.json with its predictions.

    For a run of some of the config's models (as `make real-random`), where the workflow's own
    summary rule, which needs them all, did not run, and for the saved copies of published runs
    (docs/results/runs/*/results/: predictions, windows and truth gzipped, `{cell}/truth.tsv.gz` beside
    the windows). A model is a result whose model.json is beside it or, for a pooled model, in
    pooled/{model}/; the rest are baselines. Order: cell lines by name, then `models` in the order
    given (default: models by name, then baselines by name). A workflow's results/ holds no truth
    table (the oracle columns stay empty).
    """
    results = Path(results)

    def beside(folder: Path, name: str) -> Path | None:  # the file, or its gzipped copy
        return next((path for path in (folder / name, folder / f"{name}.gz") if path.is_file()), None)

    found = sorted(
        path.parent for path in results.glob(f"*/*/{METRICS_JSON}") if beside(path.parent, "predictions.tsv")
    )
    if not found:
        raise ResultsError(
            f"{results}: no {{cell}}/{{model}}/metrics.json with predictions.tsv beside it; "
            "give a workflow's results/ folder."
        )

    def description(folder: Path) -> Path | None:
        for candidate in (description_path(folder), description_path(results / "pooled" / folder.name)):
            if candidate.is_file():
                return candidate
        return None

    def stats(folder: Path) -> Path | None:
        path = windows_stats_path(folder.parent)
        return path if path.is_file() else None

    entries = [
        ModelResult(
            folder.parent.name,
            folder.name,
            metrics_path(folder),
            description(folder),
            beside(folder, "predictions.tsv"),
            truth=beside(folder.parent, "truth.tsv"),
            windows_stats=stats(folder),
            windows=beside(folder.parent, "windows.tsv"),
        )
        for folder in found
    ]
    names = {entry.model for entry in entries}
    if models is None:
        trained = {entry.model for entry in entries if entry.description}
        models = sorted(trained) + sorted(names - trained)
    missing = [name for name in models if name not in names]
    if missing:
        raise ResultsError(f"{results}: no evaluated {', '.join(missing)} (found: {', '.join(sorted(names))}).")
    rank = {name: position for position, name in enumerate(models)}
    chosen = [entry for entry in entries if entry.model in rank]
    return sorted(chosen, key=lambda entry: (entry.cell_line, rank[entry.model]))
