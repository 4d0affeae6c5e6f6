"""The published results (docs/results/) are what the saved run files say, table for table."""

from __future__ import annotations

import importlib.util
import re

import pandas as pd
import pytest

from tests.helpers import REPO

PAGES = REPO / "docs" / "results"
# <!-- generated:NAME --> (from runs/PAGE/) or <!-- generated:NAME:RUN --> (from runs/RUN/)
BLOCK = re.compile(r"<!-- generated:(\w+)(?::(\w+))? -->\n(.*?)<!-- end generated:\1(?::\2)? -->", re.S)


def load_writer():
    spec = importlib.util.spec_from_file_location("write_tables", PAGES / "write_tables.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


GENERATED = [page.stem for page in sorted(PAGES.glob("*.md")) if BLOCK.search(page.read_text())]


def test_some_page_publishes_generated_tables():
    assert "demo" in GENERATED


@pytest.mark.parametrize("page", GENERATED)
def test_every_generated_table_equals_what_the_saved_run_files_give(page):
    writer = load_writer()
    for name, run_name, published in BLOCK.findall((PAGES / f"{page}.md").read_text()):
        run = PAGES / "runs" / (run_name or page)
        if name not in writer.BENCHMARK_TABLES:  # those read a benchmark's TSV in runs/PAGE/, not a run's summary
            assert (run / "summary.tsv").is_file(), f"docs/results/runs/{run.name}/summary.tsv is missing"
        assert published.strip() == writer.render(name, run, page).strip(), f"{page}.md table {name} is stale"


def test_the_auroc_table_bolds_a_linear_time_model_only_on_its_computed_verdict_above_its_peer(tmp_path):
    writer = load_writer()
    rows = [
        ("c1", "linear", "linear", 0.70, 100, 30, "above"),
        ("c1", "softmax", "softmax", 0.80, 100, 30, "above"),
        ("c1", "distance", None, 0.69, 100, 30, None),
        ("c1", "kmer", None, 0.65, 100, 30, None),
        ("c2", "linear", "linear", 0.62, 50, 10, "tie: interval"),
        ("c2", "softmax", "softmax", 0.55, 50, 10, "below"),
        ("c2", "distance", None, 0.50, 50, 10, None),
        ("c2", "kmer", None, 0.61, 50, 10, None),
    ]
    columns = ["cell_line", "model", "attention", "auroc", "n_test", "positives", "peer_verdict"]
    summary = pd.DataFrame(rows, columns=columns)
    table = writer.auroc_table(summary).splitlines()
    assert table[0] == "| cell line (test pairs, positives) | linear | softmax | distance | k-mer |"
    assert table[2] == "| c1 (100, 30) | **0.700** | 0.800 | 0.690 | 0.650 |"  # softmax is never bold
    assert table[3] == "| c2 (50, 10) | 0.620 | 0.550 | 0.500 | 0.610 |"  # above k-mer's point, a tie by its interval
    # A summary without verdicts (a run older than them) bolds nothing: no point comparison stands in.
    assert "**" not in writer.auroc_table(summary.drop(columns="peer_verdict"))


def test_replicated_models_show_their_spread_and_whether_a_baseline_lies_beyond_it():
    writer = load_writer()
    columns = ["cell_line", "model", "kind", "attention", "auroc", "n_test", "positives", "replicates"]
    columns += ["replicate_auroc_mean", "replicate_auroc_sd", "replicate_aurocs"]
    rows = [
        ("c1", "linear", "transformer", "linear", 0.70, 100, 30, 3, 0.69, 0.01, "0.6800;0.6900;0.7000"),
        ("c1", "distance", "baseline", None, 0.60, 100, 30, None, None, None, None),
        ("c1", "kmer", "baseline", None, 0.65, 100, 30, None, None, None, None),
        ("c2", "linear", "transformer", "linear", 0.60, 50, 10, 3, 0.58, 0.03, "0.5500;0.5800;0.6100"),
        ("c2", "distance", "baseline", None, 0.50, 50, 10, None, None, None, None),
        ("c2", "kmer", "baseline", None, 0.59, 50, 10, None, None, None, None),
    ]
    summary = pd.DataFrame(rows, columns=columns)
    auroc = writer.auroc_table(summary).splitlines()
    assert auroc[2] == "| c1 (100, 30) | 0.700 (0.690 ± 0.010) | 0.600 | 0.650 |"
    assert auroc[3] == "| c2 (50, 10) | 0.600 (0.580 ± 0.030) | 0.500 | 0.590 |"
    spread = writer.spread_table(summary, [("linear", ["kmer"]), ("linear", ["distance", "kmer"])]).splitlines()
    assert spread[0] == "| cell line | linear vs k-mer | linear vs distance or k-mer |"
    assert spread[2] == (
        "| c1 | 0.700 (0.690 ± 0.010) vs k-mer 0.650: every replicate above "
        "| 0.700 (0.690 ± 0.010) vs k-mer 0.650: every replicate above |"
    )
    # The ensemble beats k-mers on c2, but one replicate does not: a seed could reverse it.
    assert spread[3].startswith("| c2 | 0.600 (0.580 ± 0.030) vs k-mer 0.590: within the spread |")
    # A cell line without the model, or without the baselines named, shows a dash.
    partial = writer.spread_table(
        summary[summary["model"] != "kmer"], [("linear", ["kmer"]), ("softmax", ["distance"])]
    )
    assert partial.splitlines()[2] == "| c1 | — | — |"
    # With the paired interval against that baseline, the verdict reads both: above only when both say so.
    diffs = {"auroc_diff_kmer": [0.05, None, None, 0.01, None, None]}
    diffs["auroc_diff_kmer_lo"] = [0.01, None, None, -0.02, None, None]
    diffs["auroc_diff_kmer_hi"] = [0.09, None, None, 0.04, None, None]
    interval = writer.spread_table(summary.assign(**diffs), [("linear", ["kmer"])]).splitlines()
    assert interval[2].endswith("every replicate above; Δ +0.050 [+0.010, +0.090]: above |")
    assert interval[3].endswith("within the spread; Δ +0.010 [-0.020, +0.040]: tie: interval |")
    excluded = summary.assign(**diffs).assign(auroc_diff_kmer_lo=[0.01, None, None, 0.002, None, None])
    assert writer.spread_table(excluded, [("linear", ["kmer"])]).splitlines()[3].endswith(": tie: replicates |")


def test_the_paired_table_shows_the_named_differences_with_their_intervals():
    writer = load_writer()
    paired = pd.DataFrame(
        [
            ("c1", "m", "kmer", "auroc", 0.05, -0.01, 0.11),
            ("c1", "m", "kmer", "auprc", 0.5, 0.4, 0.6),
            ("c2", "m", "kmer", "auroc", -0.2, -0.3, -0.1),
        ],
        columns=["cell_line", "model", "baseline", "metric", "difference", "lo", "hi"],
    )
    table = writer.paired_table(paired, [("m", "kmer")]).splitlines()
    assert table[0] == "| cell line | m vs k-mer |"
    assert table[2:] == ["| c1 | +0.050 [-0.010, +0.110] |", "| c2 | -0.200 [-0.300, -0.100] |"]


def test_the_motif_table_lists_each_cell_lines_top_motifs_with_sign_and_q_value(tmp_path):
    writer = load_writer()
    for cell, rows in {
        "a": [(2, "SP1", "-", 0.025), (1, "GATA1", "+", 1.2e-4)],
        "b": [(1, "YY1", "+", 2e-8)],
    }.items():
        frame = pd.DataFrame(rows, columns=["rank", "motif", "sign", "q_value"])
        frame.to_csv(tmp_path / f"{cell}.linear.motifs.tsv", sep="\t", index=False)
    table = writer.motifs_table(tmp_path).splitlines()
    assert table[0] == "| rank | a | b |"
    assert table[2] == "| 1 | GATA1 (+, q 1e-4) | YY1 (+, q 2e-8) |"
    assert table[3] == "| 2 | SP1 (−, q 0.025) |  |"


def test_the_matched_table_reads_each_model_against_chance_and_against_distance():
    """Bold: the matched AUROC's interval above 0.5; starred: the paired difference from distance's above 0.
    A model can gain over distance's matched AUROC without being above chance (IMR90's case)."""
    writer = load_writer()
    columns = ["cell_line", "model", "matched_auroc", "matched_auroc_lo", "matched_auroc_diff_distance"]
    columns += ["matched_auroc_diff_distance_lo", "matched_auroc_diff_distance_hi"]
    rows = [
        ("c1", "linear", 0.66, 0.58, 0.15, 0.05, 0.25),
        ("c1", "linear_distance", 0.55, 0.47, 0.04, -0.02, 0.10),
        ("c1", "distance", 0.51, 0.44, None, None, None),
        ("c2", "linear", 0.49, 0.42, 0.11, 0.02, 0.20),
        ("c2", "kmer", None, None, None, None, None),
        ("c2", "distance", 0.38, 0.30, None, None, None),
    ]
    table = writer.matched_table(pd.DataFrame(rows, columns=columns)).splitlines()
    assert table[0] == "| cell line | linear | linear_distance | distance | k-mer |"
    assert table[2] == "| c1 | **0.660** (Δ +0.150*) | 0.550 (Δ +0.040) | 0.510 |  |"
    assert table[3] == "| c2 | 0.490 (Δ +0.110*) |  | 0.380 |  |"


def test_the_goal_table_checks_each_span_model_against_the_oracle_the_ceiling_every_bin_and_its_control(tmp_path):
    writer = load_writer()
    columns = ["cell_line", "model", "input", "between", "auroc", "oracle_auroc", "element_ceiling_auroc"]
    summary = pd.DataFrame(
        [
            ("c", "span", "span", "sequence", 0.90, 0.94, 0.75),  # meets every part
            ("c", "span_b", "span", "sequence", 0.91, 0.94, 0.75),  # loses one bin to distance
            ("c", "span_c", "span", "sequence", 0.88, 0.94, 0.75),  # 0.06 below the oracle, no control
            ("c", "span_length_control", "span", "shuffled", 0.70, 0.94, 0.75),  # a control: no row of its own
            ("c", "linear", "elements", None, 0.72, 0.94, 0.75),  # an element model: no row
        ],
        columns=columns,
    )
    bins = pd.DataFrame(
        [("c", m, b, a) for m, aurocs in {"span": (0.9, 0.8), "span_b": (0.9, 0.5), "span_c": (0.9, 0.9),
                                          "distance": (0.6, 0.6)}.items() for b, a in zip(("b1", "b2"), aurocs)],
        columns=["cell_line", "model", "bin", "auroc"],
    )  # fmt: skip
    bins.to_csv(tmp_path / "distance_bins.tsv", sep="\t", index=False)
    paired = pd.DataFrame(
        [
            ("c", "span", "span_length_control", "length_control", "auroc", 0.20, 0.10, 0.30),
            ("c", "span_b", "span_b_length_control", "length_control", "auroc", 0.21, 0.12, 0.30),
            ("c", "span_c", "distance", "baseline", "auroc", 0.40, 0.30, 0.50),
        ],
        columns=["cell_line", "model", "baseline", "reference", "metric", "difference", "lo", "hi"],
    )
    table = writer.goal_table(summary, paired, tmp_path).splitlines()
    assert len(table) == 5
    assert table[2] == "| c | span | 0.900 | 0.040 | +0.150 | 2 of 2 | +0.200 [+0.100, +0.300] | yes |"
    assert table[3].startswith("| c | span_b | 0.910 | 0.030 | +0.160 | 1 of 2 |") and table[3].endswith("| no |")
    assert table[4] == "| c | span_c | 0.880 | 0.060 | +0.130 | 2 of 2 | no control | no |"


def test_the_lottery_counts_disjoint_ensembles_apart_from_sliding_ones_against_oracle_and_ceiling(tmp_path):
    # Six base seeds (ensembles of seeds s, s+1, s+2): bases 0 and 3 share no seed. Oracle 0.94, ceiling 0.80.
    singles = [0.93, 0.70, 0.92, 0.70, 0.91, 0.86]
    ensembles = [0.92, 0.89, 0.93, 0.85, 0.93, 0.95]
    pd.DataFrame(
        {
            "base_seed": range(6),
            "single_auroc": singles,
            "ensemble3_auroc": ensembles,
            "oracle_auroc": 0.94,
            "element_ceiling_auroc": 0.80,
            "epochs_trained": 6.0,
            "val_auroc_by_epoch": "0.6;0.9",
        }
    ).to_csv(tmp_path / "seed_lottery.tsv", sep="\t", index=False)
    table = load_writer().lottery_table(tmp_path, "seed_lottery.tsv")
    rows = {line.split(" | ")[0].strip("| "): line for line in table.splitlines()}
    # Within 0.05 of the oracle: 0.89 and up; 0.10 above the ceiling: 0.90 and up.
    assert "| one seed | 3 of 6 | 3 of 6 |" in table
    assert "sliding (neighbours share 2 seeds) | 5 of 6 | 4 of 6 |" in table  # 0.89: near, not above; 0.85: neither
    assert "disjoint (no seed shared) | 1 of 2 | 1 of 2 |" in table  # bases 0 (0.92) and 3 (0.85)
    assert rows["1"].startswith("| 1 | 0.700 | no | no | 0.890 | yes | no |  |")
    assert rows["3"].startswith("| 3 | 0.700 | no | no | 0.850 | no | no | yes |")


def test_the_delta_rule_tables_bold_only_what_meets_issue_40s_targets(tmp_path):
    writer = load_writer()
    rows = [
        (16, 4000, "linear", 4.0, 1.0),
        (16, 4000, "deltanet both ways", 80.0, 20.0),
        (16, 4000, "deltanet both ways (C++)", 30.0, 7.5),
        (64, 4000, "linear", 20.0, 1.0),
        (64, 4000, "deltanet both ways", 300.0, 15.0),
        (64, 4000, "deltanet both ways (C++)", 170.0, 8.5),
    ]
    pd.DataFrame(rows, columns=["head_size", "T", "variant", "ms", "ratio_to_linear"]).to_csv(
        tmp_path / "delta_rule_op.tsv", sep="\t", index=False
    )
    lines = writer.render("delta_op", tmp_path, "attentions").splitlines()
    assert lines[0] == "| head size | T | ELU+1 (ms) | DeltaNet, PyTorch | DeltaNet, C++ |"
    assert lines[2:] == ["| 16 | 4,000 | 4 | 20.0x | **7.5x** |", "| 64 | 4,000 | 20 | 15.0x | 8.5x |"]
    pace = [
        ("linear", "torch", 0.1, 100.0, 1.0),
        ("deltanet", "torch", 0.5, 20.0, 0.2),
        ("deltanet", "cpp", 0.2, 50.0, 0.5),
    ]
    pd.DataFrame(pace, columns=["attention", "scan", "seconds_a_step", "tokens_per_s", "pace_against_m7"]).to_csv(
        tmp_path / "delta_rule_training.tsv", sep="\t", index=False
    )
    lines = writer.render("delta_pace", tmp_path, "attentions").splitlines()
    assert lines[2:] == [
        "| ELU+1 (M7) |  | 0.100 | 100 | 1.00 |",
        "| DeltaNet | PyTorch | 0.500 | 20 | 0.20 |",
        "| DeltaNet | C++ | 0.200 | 50 | **0.50** |",
    ]


def test_the_selection_table_shows_each_candidates_validation_auroc_and_bolds_the_chosen(tmp_path):
    writer = load_writer()
    (tmp_path / "results").mkdir()
    rows = [  # (cell line, model, candidate, validation pairs, validation AUROC, mean, chosen)
        ("c1", "a", True, 10, 0.60, 0.65, False),
        ("c2", "a", True, 12, 0.70, 0.65, False),
        ("c1", "b", True, 10, 0.70, 0.70, True),
        ("c2", "b", True, 12, 0.70, 0.70, True),
        ("c1", "softmax", False, 10, 0.90, 0.90, False),  # not a candidate: its AUROC is no choice
        ("c2", "softmax", False, 12, 0.90, 0.90, False),
    ]
    columns = ["cell_line", "model", "candidate", "val_pairs", "val_auroc", "mean_val_auroc", "chosen"]
    pd.DataFrame(rows, columns=columns).to_csv(tmp_path / "results" / "selection.tsv", sep="\t", index=False)
    table = writer.selection_table(tmp_path).splitlines()
    assert table[0] == "| model (validation AUROC) | c1 (10 pairs) | c2 (12 pairs) | mean |"
    assert table[2:] == ["| a | 0.600 | 0.700 | 0.650 |", "| **b** (chosen) | 0.700 | 0.700 | **0.700** |"]
    with pytest.raises(SystemExit, match="selection.tsv is missing"):
        writer.selection_table(tmp_path / "elsewhere")


def test_the_attention_study_tables_show_the_choice_on_validation_and_each_chosen_recipe_over_seeds(tmp_path):
    writer = load_writer()
    recipes = pd.DataFrame(
        [
            ("linear", 0.001, 1, 0.7, "0.7000", 6.0, False),
            ("linear", 0.002, 1, 0.9, "0.9000", 6.0, True),
            ("deltanet", 0.001, 2, 0.8, "0.7000;0.9000", 5.9, True),
        ],
        columns=["attention", "learning_rate", "seeds", "mean_val_auroc", "val_aurocs", "median_epochs", "chosen"],
    )
    recipes.to_csv(tmp_path / "attention_recipes.tsv", sep="\t", index=False)
    assert writer.recipes_table(tmp_path).splitlines()[2:] == [
        "| ELU+1 (M7) | 0.001 | 0.700 | 0.700 | 6.0 |",
        "| ELU+1 (M7) | 0.002 | 0.900 | **0.900** (chosen) | 6.0 |",
        "| DeltaNet | 0.001 | 0.700, 0.900 | **0.800** (chosen) | 5.9 |",
    ]
    seeds = pd.DataFrame(
        [  # seed, attention, learning rate, test AUROC, found, epochs, tokens/s, peak memory
            (1, "linear", 0.002, 0.93, True, 6.0, 120000.0, 3000.0),
            (0, "linear", 0.002, 0.90, False, 6.0, 118000.0, 3100.0),
            (0, "deltanet", 0.001, 0.95, True, 5.9, 80000.0, 2500.0),
        ],
        columns=["seed", "attention", "learning_rate", "auroc", "found", "epochs_trained", "tokens_per_s",
                 "peak_memory_mb"],
    ).assign(oracle_auroc=0.96, element_ceiling_auroc=0.8, weight_decay=0.01, dropout=0.0)  # fmt: skip
    seeds["ensemble_auroc"] = seeds["attention"].map({"linear": 0.92, "deltanet": 0.95})
    deltanet = seeds["attention"] == "deltanet"  # against M7's ensemble: only the other attentions
    seeds.loc[deltanet, ["vs_m7", "vs_m7_lo", "vs_m7_hi"]] = [0.03, 0.01, 0.05]
    seeds.loc[deltanet, "vs_m7_seeds"] = "every seed above"
    seeds.to_csv(tmp_path / "attention_epochs.tsv", sep="\t", index=False)
    table = writer.epochs_table(tmp_path).splitlines()
    assert table[0] == "Oracle 0.960, element-only ceiling 0.800."
    assert table[4:] == [
        "| ELU+1 (M7) | 0.002, 0.01, 0 | 0.900, 0.930 | 0.920 |  | 1 of 2 | 6.0 | 118,000-120,000 | 3,000-3,100 MB |",
        "| DeltaNet | 0.001, 0.01, 0 | 0.950 | 0.950 | +0.030 [+0.010, +0.050], every seed above | 1 of 1 | 5.9 "
        "| 80,000 | 2,500 MB |",
    ]
