"""Score a cell line's VCF variants in the windows of its pairs with one of its models (`epiformer variants`)."""

from pathlib import Path

from epiformer.io.runlog import setup_logging
from epiformer.scoring.variants import score_variants

log = setup_logging(snakemake.log[0])
summary = score_variants(
    Path(snakemake.input.description).parent,
    snakemake.input.genome,
    snakemake.input.pairs,
    snakemake.input.vcf,
    snakemake.output.variants,
    unscored_path=snakemake.output.unscored,
)
log.info("%d (pair, allele) rows from %d VCF records", summary["rows"], summary["records"])
