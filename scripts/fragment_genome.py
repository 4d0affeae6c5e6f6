"""Place known contigs on N-filled chromosomes of true length: a bgzip genome with its .fai and .gzi."""

from epiformer.io.runlog import setup_logging
from epiformer.synthetic.fragment_genome import build_fragment_genome

setup_logging(snakemake.log[0])
build_fragment_genome(snakemake.input.fragments, snakemake.input.sizes, snakemake.output.fasta)
