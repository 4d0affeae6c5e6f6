import hashlib
import re
from pathlib import Path

import pandas as pd
from snakemake.utils import validate

validate(config, schema="../schemas/config.schema.yaml")

samples = pd.read_csv(config["samples"], sep="\t", dtype=str, comment="#").fillna("")
validate(samples, schema="../schemas/samples.schema.yaml")
if samples["cell_line"].duplicated().any():
    raise ValueError(
        f"{config['samples']}: cell_line "
        f"{samples['cell_line'][samples['cell_line'].duplicated()].iloc[0]!r} appears twice; names must be unique."
    )
for _row in samples.itertuples():
    if _row.genome not in config["genomes"]:
        raise ValueError(
            f"{config['samples']}: cell line {_row.cell_line!r} uses genome {_row.genome!r}, "
            f"which is not a key of `genomes:` in the config (known: {', '.join(config['genomes'])})."
        )
samples = samples.set_index("cell_line", drop=False)

CELL_LINES = list(samples.index)
MODELS = list(config["models"])
BASELINES = list(config["baselines"]["names"])
EVALUATED = MODELS + BASELINES  # every table and plot shows models and baselines side by side
if set(MODELS) & set(BASELINES):
    raise ValueError(
        f"models: {', '.join(sorted(set(MODELS) & set(BASELINES)))} is also a baseline's name; "
        "rename the model (results/{cell}/{name}/ would hold both)."
    )


wildcard_constraints:
    cell="|".join(map(re.escape, CELL_LINES)),
    model="|".join(map(re.escape, MODELS)),
    baseline="|".join(map(re.escape, BASELINES)) or "$^",


def get_pairs(wildcards):
    return samples.loc[wildcards.cell, "pairs"]


def get_genome(wildcards):
    return config["genomes"][samples.loc[wildcards.cell, "genome"]]


def get_genome_index(wildcards):
    return get_genome(wildcards) + ".fai"


def get_truth(cell):
    return samples.loc[cell, "truth"] if "truth" in samples.columns else ""


def all_outputs():
    return [
        expand("results/{cell}/{model}/metrics.json", cell=CELL_LINES, model=EVALUATED),
        expand("results/plots/{cell}/{figure}.png", cell=CELL_LINES, figure=["roc_pr", "calibration"]),
        expand("results/plots/{cell}/{model}.training.png", cell=CELL_LINES, model=MODELS),
        expand("results/transfer/{model}.tsv", model=MODELS),
        expand("results/plots/transfer/{model}.png", model=MODELS),
        "results/plots/comparison.png",
        "results/plots/scaling_reference.png",
        "results/summary.tsv",
        "results/summary.md",
    ]


def demo_generator_checksum():
    """Re-make the demo when its generator changes (Snakemake tracks the scripts, not the package)."""
    package = Path(workflow.basedir) / "src" / "epiformer"
    sources = [package / name for name in ("demo.py", "motifs.py")]
    return hashlib.sha256(b"".join(path.read_bytes() for path in sources if path.exists())).hexdigest()[:16]
