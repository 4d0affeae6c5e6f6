"""Encode a genome FASTA once into a genome store (data.genome_store): what span shards cut their bases from."""

from epiformer.data.encode_genome import build_store
from epiformer.io.runlog import setup_logging

log = setup_logging(snakemake.log[0])


reported = [-1]  # the last tenth of the genome logged: a draft assembly has tens of thousands of sequences


def report(done: int, total: int) -> None:
    tenth = 10 * done // max(total, 1)
    if tenth > reported[0]:
        reported[0] = tenth
        log.info("Encoded %s of %s bases (%.0f%%)", f"{done:,}", f"{total:,}", 100 * done / max(total, 1))


manifest = build_store(snakemake.input.fasta, snakemake.output.store, progress=report)
log.info(
    "Genome store of %s: %d sequences, %s bases in %s bytes",
    snakemake.input.fasta,
    len(manifest["sequences"]),
    f"{manifest['bases']:,}",
    f"{manifest['bytes']:,}",
)
