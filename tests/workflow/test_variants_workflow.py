"""A real tiny Snakemake run whose sample sheet gives one cell line a VCF: rule variants scores it."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from tests.helpers import (
    copy_workflow,
    job_counts,
    per_cell_and_pooled_config,
    read_fasta,
    require_bedtools,
    run_workflow,
    snakemake,
)


def demo_vcf(folder) -> list[str]:
    """SNVs at the centre of the first pair's enhancer and the second pair's promoter, one far from every element."""
    genome = {name: bases.upper() for name, bases in read_fasta(folder / "resources/demo/genome.fa").items()}
    pairs = pd.read_csv(folder / "resources/demo/demo_a.pairs.csv")
    centres = [
        (pairs.loc[0, "enhancer_chrom"], (pairs.loc[0, "enhancer_start"] + pairs.loc[0, "enhancer_end"]) // 2),
        (pairs.loc[1, "promoter_chrom"], (pairs.loc[1, "promoter_start"] + pairs.loc[1, "promoter_end"]) // 2),
    ]
    on_chr1 = [
        pairs.loc[pairs[f"{e}_chrom"] == "chr1", [f"{e}_start", f"{e}_end"]].to_numpy()
        for e in ("enhancer", "promoter")
    ]
    elements = np.concatenate(on_chr1)
    far = next(
        p
        for p in range(20_000, len(genome["chr1"]) - 20_000, 97)
        if ((elements[:, 0] - 1_000 > p) | (elements[:, 1] + 1_000 < p)).all() and genome["chr1"][p] in "ACGT"
    )
    records = []
    for chrom, start in [*centres, ("chr1", far)]:
        ref = genome[chrom][start]
        alt = "A" if ref != "A" else "C"
        records.append(f"{chrom}\t{start + 1}\t.\t{ref}\t{alt}\t.\t.\t.")
    contigs = [f"##contig=<ID={name},length={len(seq)}>" for name, seq in genome.items()]
    header = ["##fileformat=VCFv4.2", *contigs, "#CHROM\tPOS\tID\tREF\tALT\tQUAL\tFILTER\tINFO"]
    (folder / "data").mkdir(exist_ok=True)
    (folder / "data" / "demo_a.vcf").write_text("\n".join([*header, *records]) + "\n")
    return records


@pytest.fixture(scope="module")
def variants_run(tmp_path_factory):
    require_bedtools()
    config = per_cell_and_pooled_config()
    folder = copy_workflow(tmp_path_factory.mktemp("variants_workflow"), config)
    run_workflow(folder, "resources/demo/genome.fa")  # the demo, to write a VCF of its genome
    records = demo_vcf(folder)
    sheet = pd.read_csv(folder / "config" / "samples.tsv", sep="\t", dtype=str)
    sheet["vcf"] = ["data/demo_a.vcf", ""]
    sheet.to_csv(folder / "config" / "samples.tsv", sep="\t", index=False)
    planned = snakemake(folder, "-n")
    assert planned.returncode == 0, planned.stderr[-3000:]
    run_workflow(folder, "results/demo_a/linear/variants.tsv")
    return {"folder": folder, "records": records, "planned": job_counts(planned.stdout)}


def test_all_scores_variants_only_for_cell_lines_with_a_vcf_and_their_own_element_models(variants_run):
    assert variants_run["planned"]["variants"] == 1  # demo_a x linear: not demo_b, not the pooled model


def test_the_rule_writes_variants_and_the_unscored(variants_run):
    results = variants_run["folder"] / "results" / "demo_a" / "linear"
    rows = pd.read_csv(results / "variants.tsv", sep="\t")
    positions = [int(record.split("\t")[1]) for record in variants_run["records"]]
    assert set(rows["pos"]) == set(positions[:2]) and {"enhancer", "promoter"} <= set(rows["element"])
    assert rows[["ref_score", "alt_score"]].stack().between(0, 1).all()
    unscored = pd.read_csv(results / "variants.unscored.tsv", sep="\t")
    assert unscored[["pos", "reason"]].values.tolist() == [[positions[2], "outside_every_window"]]
    assert "rows from 3 VCF records" in (variants_run["folder"] / "logs/demo_a/linear/variants.log").read_text()
