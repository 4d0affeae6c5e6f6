"""Index a genome FASTA once (samtools-compatible .fai)."""

from epiformer.genome import index_fasta
from epiformer.runlog import setup_logging

log = setup_logging(snakemake.log[0])
log.info("Indexed %s", index_fasta(snakemake.input.fasta))
