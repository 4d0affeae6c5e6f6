"""Index a genome FASTA once (samtools-compatible .fai)."""

from epiformer.data.genome import index_fasta
from epiformer.io.runlog import setup_logging

log = setup_logging(snakemake.log[0])
log.info("Indexed %s", index_fasta(snakemake.input.fasta))
