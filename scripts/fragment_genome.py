"""Place known contigs on N-filled chromosomes of true length: a bgzip genome with its .fai and .gzi."""

from epiformer.fragment_genome import build_fragment_genome
from epiformer.runlog import setup_logging

setup_logging(snakemake.log[0])
build_fragment_genome(snakemake.input.fragments, snakemake.input.sizes, snakemake.output.fasta)
