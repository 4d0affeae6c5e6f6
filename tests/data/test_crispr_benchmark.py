"""ENCODE-rE2G's CRISPRi benchmark as shipped in data/crispri-k562/ (README there): read with the benchmark's
own columns, windowed as the workflow windows it (config/crispri.yaml's widths), and split by the overlay's
held-out chromosomes. Coordinates only; no sequence is needed."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import yaml
from sklearn.metrics import average_precision_score

from epiformer.data.chromosomes import read_chrom_sizes
from epiformer.data.pairs import PairsError, read_pairs
from epiformer.data.splits import SplitSpec, assign_splits
from epiformer.data.windows import WINDOW_COLUMNS, WindowSpec, make_windows
from epiformer.evaluation.metrics import benchmark_auprc, bootstrap_interval, precision_at_recall
from tests.helpers import REPO

DATA = REPO / "data" / "crispri-k562"
K562 = DATA / "EPCrisprBenchmark_combined_data.training_K562.GRCh38.tsv.gz"
HELD_OUT = DATA / "EPCrisprBenchmark_combined_data.heldout_5_cell_types.GRCh38.tsv.gz"
OVERLAY = yaml.safe_load((REPO / "config" / "crispri.yaml").read_text())
SIZES = read_chrom_sizes(DATA / "GRCh38.chrom.sizes")


def spans_of(windows: pd.DataFrame) -> pd.Series:
    """Each pair's span, first window start to the further window end (bp)."""
    first_start = windows[["enhancer_start", "promoter_start"]].min(axis=1)
    return windows[["enhancer_end", "promoter_end"]].max(axis=1) - first_start


@pytest.fixture(scope="module")
def k562():
    """The K562 table read with its own TSSs (`startTSS`; the overlay takes the annotation's: below), and its
    windows as the overlay places them."""
    pairs = read_pairs(K562)
    windows, stats = make_windows(pairs, SIZES, WindowSpec(**OVERLAY["windows"]))
    return pairs, windows, stats


def test_the_k562_table_reads_as_the_benchmark_counts_it(k562):
    pairs, windows, stats = k562
    assert pairs.attrs["format"] == "crispr_benchmark"
    assert stats.pairs_in == 10_356 and len(pairs) == len(windows) == 10_275
    assert pairs["label"].sum() == windows["label"].sum() == 471  # every positive kept
    # The benchmark writes startTSS = endTSS = 0 for a gene it has no TSS for: 81 rows, C19orf43's, all negative.
    missing = pd.read_csv(K562, sep="\t").iloc[pairs.attrs["dropped_on_read"]["tss_missing"]]
    assert stats.dropped["tss_missing"] == len(missing) == 81 and set(missing["measuredGeneSymbol"]) == {"C19orf43"}
    assert (missing[["startTSS", "endTSS"]] == 0).all().all() and not missing["Regulated"].any()
    assert {reason: n for reason, n in stats.dropped.items() if n} == {"tss_missing": 81}
    assert {"measuredGeneSymbol", "distanceToTSS", "CellType", "H3K27ac.RPM"} <= set(pairs.columns)
    assert list(windows.columns) == WINDOW_COLUMNS  # the chromatin columns never reach a window


def test_every_k562_window_is_centred_on_its_element_and_on_the_tss(k562):
    pairs, windows, _ = k562
    pairs = pairs.set_index("pair_id").loc[windows["pair_id"]].reset_index()
    assert (pairs["promoter_end"] - pairs["promoter_start"] == 1).all()  # the TSS: 1 bp
    element_centre = (pairs["enhancer_start"] + pairs["enhancer_end"]) // 2
    assert ((windows["enhancer_start"] + windows["enhancer_end"]) // 2 == element_centre).all()
    assert ((windows["promoter_start"] + windows["promoter_end"]) // 2 == pairs["promoter_start"]).all()
    assert (windows["enhancer_end"] - windows["enhancer_start"] == OVERLAY["windows"]["enhancer_width"]).all()
    assert (windows["promoter_end"] - windows["promoter_start"] == OVERLAY["windows"]["promoter_width"]).all()


def test_the_workflow_distance_and_the_benchmark_distance_to_tss(k562):
    """The workflow's distance is between the windows' centres: |(chromStart + chromEnd) // 2 - startTSS|, exactly.
    The table's distanceToTSS is element centre to the TSS of the benchmark's gene annotation (GENCODE v43
    collapsed gene bounds), not to startTSS: the two differ by the TSS, not by the element's half-width."""
    pairs, windows, _ = k562
    pairs = pairs.set_index("pair_id").loc[windows["pair_id"]].reset_index()
    element_centre = (pairs["enhancer_start"] + pairs["enhancer_end"]) // 2
    assert (windows["distance"] == (element_centre - pairs["promoter_start"]).abs()).all()
    gap = (pairs["distanceToTSS"].astype(int) - windows["distance"]).abs()
    assert [(gap <= bp).sum() for bp in (0, 1000, 10_000)] == [946, 8892, 9445]  # of 10,275 (README)
    assert gap.max() == 391_008
    assert pd.Series(windows["distance"]).corr(pairs["distanceToTSS"].astype(int), method="spearman") > 0.99
    half_width = (pairs["enhancer_end"] - pairs["enhancer_start"]) / 2
    assert ((gap - half_width).abs() < 1).sum() < 0.02 * len(gap)  # not an element half-width apart
    positives = windows["label"] == 1
    assert np.median(windows.loc[positives, "distance"]) == 27_326  # negatives: 387,481.5
    assert np.median(windows.loc[~positives, "distance"]) == 387_481.5


def test_distance_alone_reproduces_the_published_auprc_and_predicts_the_distance_baseline(k562):
    """Published (Gschwind et al., docs/results/crispri.md): distance to the TSS alone, AUPRC 0.44 on the K562 set.
    The workflow's distance baseline ranks the test pairs by window distance: 0.502 is what a real run must give it."""
    pairs, windows, _ = k562
    pairs = pairs.set_index("pair_id").loc[windows["pair_id"]].reset_index()
    labels, closer = windows["label"], -windows["distance"]
    assert round(average_precision_score(labels, -pairs["distanceToTSS"].astype(int)), 3) == 0.439
    assert round(average_precision_score(labels, closer), 3) == 0.415
    test = (assign_splits(windows, SplitSpec.from_config(OVERLAY["split"]))["split"] == "test").to_numpy()
    assert round(average_precision_score(labels[test], closer[test]), 3) == 0.502
    interval = bootstrap_interval(labels[test].to_numpy(), closer[test].to_numpy(), average_precision_score, 1000, 0)
    assert np.round(interval, 3).tolist() == [0.388, 0.627]  # as evaluate resamples, with its defaults


ANNOTATION = DATA / "CollapsedGeneBounds.hg38.TSS500bp.bed.gz"


def test_tss_from_the_benchmarks_annotation_reproduce_its_distance_to_tss_and_published_auprc():
    """With the overlay's annotation each TSS is its gene's (500-bp window's centre), as CRISPR_comparison places
    it: every pair kept (the 81 without a table TSS get one), the table's distanceToTSS within 1 bp, and distance
    alone scores the published AUPRC, 0.4359, by the benchmark's trapezoid rule (average precision: 0.4377)."""
    assert OVERLAY["windows"]["tss_annotation"] == str(ANNOTATION.relative_to(REPO))
    pairs = read_pairs(K562, tss_annotation=ANNOTATION)
    windows, stats = make_windows(pairs, SIZES, WindowSpec(**OVERLAY["windows"]))
    assert len(windows) == stats.pairs_in == 10_356 and not any(stats.dropped.values())
    pairs = pairs.set_index("pair_id").loc[windows["pair_id"]].reset_index()
    assert (windows["distance"] - pairs["distanceToTSS"].astype(int)).abs().max() <= 1
    has_table_tss = pairs["table_tss"].astype(int) > 0
    moved = (pairs["table_tss"].astype(int) - pairs["promoter_start"].astype(int)).abs() > 1000
    assert (int(has_table_tss.sum()), int((moved & has_table_tss).sum())) == (10_275, 1_383)
    labels, closer = windows["label"].to_numpy(), -windows["distance"].to_numpy()
    assert abs(benchmark_auprc(labels, closer) - 0.4359) < 5e-4
    assert round(average_precision_score(labels, closer), 4) == 0.4377
    assert 0.2 < precision_at_recall(labels, closer, 0.7) < 0.4


def test_the_benchmark_auprc_rule_and_precision_at_recall_on_a_small_case():
    """Points at each distinct score, highest first (recall, precision): (1/3, 1), (2/3, 1), (2/3, 2/3), (1, 3/4),
    (1, 3/5); less the two lowest-score points, the trapezoid over the first three is 1/3 x (1 + 1) / 2 + 0. The
    highest threshold recalling 70% of the positives is the fourth score: precision 3/4."""
    labels, scores = [1, 1, 0, 1, 0], [0.9, 0.8, 0.7, 0.6, 0.5]
    assert benchmark_auprc(labels, scores) == pytest.approx(1 / 3)
    assert precision_at_recall(labels, scores, 0.7) == pytest.approx(3 / 4)


def test_a_gene_missing_from_the_annotation_is_set_aside_and_a_missing_annotation_is_an_error(tmp_path):
    table = pd.read_csv(K562, sep="\t", dtype=str, keep_default_na=False).head(6)
    table.loc[2, "measuredGeneSymbol"] = "NOT_A_GENE"
    table.to_csv(tmp_path / "pairs.tsv", sep="\t", index=False)
    pairs = read_pairs(tmp_path / "pairs.tsv", tss_annotation=ANNOTATION)
    assert pairs["pair_id"].tolist() == [0, 1, 3, 4, 5] and pairs.attrs["dropped_on_read"][
        "gene_not_in_annotation"
    ] == [2]
    with pytest.raises(PairsError, match="TSS annotation not found: .*nowhere.bed"):
        read_pairs(tmp_path / "pairs.tsv", tss_annotation=tmp_path / "nowhere.bed")
    (tmp_path / "bad.bed").write_text("chr1\t100\t50\tGENE\n")
    with pytest.raises(PairsError, match="bad.bed, line 1: start and end"):
        read_pairs(tmp_path / "pairs.tsv", tss_annotation=tmp_path / "bad.bed")


def test_the_overlay_split_holds_out_a_fair_share_of_the_positives(k562):
    _, table_tss, _ = k562
    pairs = read_pairs(K562, tss_annotation=ANNOTATION)  # the overlay's TSSs
    annotated, _ = make_windows(pairs, SIZES, WindowSpec(**OVERLAY["windows"]))
    for windows, train in ((annotated, 7909), (table_tss, 7828)):  # the 81 without a table TSS are chr19's: train
        split = assign_splits(windows, SplitSpec.from_config(OVERLAY["split"]))
        counts = split.groupby("split")["label"].agg(["size", "sum"])
        assert counts.loc["test"].tolist() == [1715, 82] and counts.loc["val"].tolist() == [732, 64]  # 17.4%, 13.6%
        assert counts.loc["train"].tolist() == [train, 325]  # config/crispri.yaml and docs/results/crispri.md
        assert spans_of(split).max() <= 2_377_666 <= OVERLAY["windows"]["max_span"]  # the span model reads them all


def test_the_held_out_table_reads_and_its_tss_windows_centre_on_the_tss_interval():
    pairs = read_pairs(HELD_OUT)
    widths = {key: OVERLAY["windows"][key] for key in ("enhancer_width", "promoter_width")}
    windows, stats = make_windows(pairs, SIZES, WindowSpec(**widths))  # element windows: no span limit
    assert stats.pairs_in == 4378 and len(windows) == 4354 and windows["label"].sum() == 189
    assert spans_of(windows).max() == 2_994_183  # a span model on this table needs windows.max_span >= 3 Mb
    assert {reason: n for reason, n in stats.dropped.items() if n} == {"tss_missing": 23, "element_empty": 1}
    empty = pd.read_csv(HELD_OUT, sep="\t").iloc[pairs.attrs["dropped_on_read"]["element_empty"]]
    assert empty[["measuredGeneSymbol", "chromStart", "chromEnd", "Regulated"]].values.tolist() == [
        ["PTGER4", 40490507, 40490507, True]
    ]  # the one positive lost, counted
    pairs = pairs.set_index("pair_id").loc[windows["pair_id"]].reset_index()
    tss_centre = (pairs["promoter_start"] + pairs["promoter_end"]) // 2  # 1 bp, or 500 bp for the HCT116 rows
    assert ((windows["promoter_start"] + windows["promoter_end"]) // 2 == tss_centre).all()
    assert set(pairs.loc[pairs["promoter_end"] - pairs["promoter_start"] == 500, "CellType"]) == {"HCT116"}


def test_grch38_sizes_are_the_primary_chromosomes_and_hold_every_benchmark_coordinate():
    assert list(SIZES) == [f"chr{name}" for name in [*range(1, 23), "X", "Y", "M"]]
    assert SIZES["chr1"] == 248_956_422 and sum(SIZES.values()) == 3_088_286_401  # UCSC hg38 (README)
    for path in (K562, HELD_OUT):
        table = pd.read_csv(path, sep="\t")
        for chrom, end in (("chrom", "chromEnd"), ("chrTSS", "endTSS")):
            assert (table[end] <= table[chrom].map(SIZES)).all()  # make_windows checks the same, naming the row


def test_the_sample_sheet_names_the_shipped_k562_table_on_grch38():
    sheet = pd.read_csv(REPO / "config" / "crispri.tsv", sep="\t")
    assert sheet.to_dict("records") == [{"cell_line": "K562", "pairs": str(K562.relative_to(REPO)), "genome": "GRCh38"}]
    assert set(OVERLAY["genomes"]) == {"GRCh38"}
