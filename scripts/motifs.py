"""TF-MoDISco motifs of a model's attributions, matched to JASPAR: motifs.tsv and the logos figure."""

from epiformer.interpret.motif_discovery import ModiscoSpec, discover_motifs
from epiformer.io.runlog import setup_logging
from epiformer.sequence.motifs import bundled_jaspar_path

setup_logging(snakemake.log[0])
discover_motifs(
    snakemake.input.attributions,
    snakemake.input.jaspar or bundled_jaspar_path(),  # explain.jaspar, or the matrices shipped with epiformer
    snakemake.output.motifs,
    snakemake.output.logos,
    ModiscoSpec(**snakemake.params.modisco),
    title=f"{snakemake.wildcards.cell} {snakemake.wildcards.model}: motifs of the attributions, by rank",
)
