import hashlib
import os
import re
import sys
from pathlib import Path

import pandas as pd
from snakemake.exceptions import WorkflowError
from snakemake.utils import validate

# The workflow's own files (docs/, src/) are found beside this file, so that the workflow runs
# from a user's folder (`snakemake -s /path/to/epiformer/Snakefile`, or as a `module`); config,
# sample sheet, data, results and logs stay relative to the working directory.
WORKFLOW_DIR = Path(workflow.current_basedir).parents[1]
if (WORKFLOW_DIR / "pyproject.toml").exists():
    # envs/install-epiformer.sh installs the package into each conda env from this checkout.
    os.environ.setdefault("EPIFORMER_SOURCE", str(WORKFLOW_DIR))

# Settings are checked now, while the DAG is built, by the package the jobs use (these
# modules import nothing heavy), so a bad setting fails before windows and encode run, naming
# its key, not hours later inside a job.
for _source in (WORKFLOW_DIR, Path(os.environ.get("EPIFORMER_SOURCE", WORKFLOW_DIR))):
    if (_source / "src" / "epiformer").is_dir():
        sys.path.insert(0, str(_source / "src"))
try:
    from epiformer.data.chromosomes import fai_path, read_chrom_sizes
    from epiformer.data.splits import SplitSpec
    from epiformer.constants import BASELINES as BASELINE_NAMES, POOLED_SUFFIX
    from epiformer.io.configfile import check_folder_names, check_numbers, check_sample_sheet, schema_error_in_brief
    from epiformer.plan import RunPlan
    from epiformer.training.schedule import ENCODING_PRIORITY
except ModuleNotFoundError:
    raise ModuleNotFoundError(
        "The workflow checks its settings with the epiformer package, which this Snakemake cannot import: "
        "install it where snakemake runs (pip install -e /path/to/epiformer) or set EPIFORMER_SOURCE to a checkout."
    ) from None

check_numbers(config)
try:
    validate(config, schema="../schemas/config.schema.yaml")
except WorkflowError as error:
    raise schema_error_in_brief(error, "config") from None
samples = pd.read_csv(config["samples"], sep="\t", dtype=str, comment="#").fillna("")
check_sample_sheet(samples, config["genomes"], config["samples"])  # clear messages before the schema's
try:
    validate(samples, schema="../schemas/samples.schema.yaml")
except WorkflowError as error:
    raise schema_error_in_brief(error, f"sample sheet {config['samples']}") from None
samples = samples.set_index("cell_line", drop=False)

check_folder_names(  # a model's folder beside the baselines'
    config["models"],
    "model",
    "config (models:)",
    {
        folder: f"results/{{cell}}/{folder}/: the {folder} baseline"
        for name in BASELINE_NAMES
        for folder in (name, name + POOLED_SUFFIX)
    },
)
CELL_LINES = list(samples.index)
# What the config asks for, decided once in the package (epiformer.plan); below, its answers under the
# names the rules use.
try:
    PLAN = RunPlan(config, CELL_LINES)
except ValueError as error:
    raise ValueError(str(error)) from None
config["models"] = PLAN.config["models"]  # every span model beside its length control, as a model of its own
MODELS = PLAN.models
BASELINES = PLAN.baselines
POOLED_MODELS = PLAN.pooled_models
POOLED_BASELINES = PLAN.pooled_baselines
EVALUATED = PLAN.evaluated
CELL_MODELS = PLAN.cell_models
TRANSFER_MODELS = PLAN.transfer_models
SPAN_MODELS = PLAN.span_models
ELEMENT_MODELS = PLAN.element_models
REPLICATED_MODELS = PLAN.replicated_models
REPLICATES = PLAN.replicates  # folder names of a replicated model's replicates
REPLICATE_NUMBERS = [str(number) for number in range(1, len(REPLICATES) + 1)]  # the {replicate} wildcard's values
TRAINING_PRIORITIES = PLAN.training_priorities
model_config = PLAN.model_config
replicates_of = PLAN.replicates_of
train_params = PLAN.train_params
model_dir = PLAN.model_dir
get_shards = PLAN.shards_of
scoring_tokens = PLAN.scoring_tokens
scoring_device = PLAN.scoring_device
scoring_gpus = PLAN.scoring_gpus
windows_params = PLAN.windows_params
# Variant effects (the variants rule; `epiformer variants`): for each cell line whose sample sheet row
# gives a `vcf`, by each of its own models (a span model scores a variant anywhere in a pair's span).
VARIANT_CELLS = [cell for cell in CELL_LINES if "vcf" in samples.columns and samples.loc[cell, "vcf"]]


def training_priority(wildcards):
    """Trainings before other jobs when cores are short, the longest first (`training.schedule`)."""
    return TRAINING_PRIORITIES[wildcards.model]


def checkpoint_dir(folder, wildcards):
    """Where a training job keeps its checkpoint (outside the outputs, which a failed job loses): one per replicate."""
    replicate = [f"replicates/{wildcards.replicate}"] if wildcards.get("replicate") else []
    return os.path.join(".epiformer-checkpoints", folder, *replicate)


def model_weights(cell, model):
    """The weight files a model folder loads: its model.safetensors, or each replicate's."""
    folder = model_dir(cell, model)
    return [f"{folder}/{name}/model.safetensors" for name in replicates_of(model)] or [f"{folder}/model.safetensors"]


def train_logs(folder, model):
    """The training logs of a model's folder: its own, or each replicate's."""
    return [f"{folder}/{name}/train_log.tsv" for name in replicates_of(model)] or [f"{folder}/train_log.tsv"]


for _genome, _fasta in config["genomes"].items():
    # Held-out chromosomes the genome lacks, where its index exists already (a genome made by the
    # workflow is checked by the windows job).
    if _genome in set(samples["genome"]) and fai_path(_fasta).is_file():
        SplitSpec.from_config(config["split"]).check(read_chrom_sizes(fai_path(_fasta)), f"genome {_genome} ({_fasta})")


def regex_of(names):
    """A wildcard constraint matching exactly these names (none: matches nothing)."""
    return "|".join(map(re.escape, names)) or "$^"


wildcard_constraints:
    cell="|".join(map(re.escape, CELL_LINES)),
    model=regex_of(MODELS),
    baseline="|".join(map(re.escape, BASELINES)) or "$^",


def get_pairs(wildcards):
    return samples.loc[wildcards.cell, "pairs"]


def get_genome(wildcards):
    return config["genomes"][samples.loc[wildcards.cell, "genome"]]


def get_genome_index(wildcards):
    return get_genome(wildcards) + ".fai"


def get_genome_store(wildcards):
    """The genome store of the cell line's genome (written by the genome_store rule), which span shards cut bases from."""
    return f"results/genomes/{samples.loc[wildcards.cell, 'genome']}/store"


def get_vcf(wildcards):
    return samples.loc[wildcards.cell, "vcf"]


def get_truth(cell):
    return samples.loc[cell, "truth"] if "truth" in samples.columns else ""


def all_outputs():
    """The targets of `all`, the default (called once every rule file is included, as it uses their lists)."""
    return [
        expand("results/{cell}/{model}/metrics.json", cell=CELL_LINES, model=EVALUATED),
        expand(
            "results/{cell}/{model}/predictions.{track}",
            cell=CELL_LINES,
            model=EVALUATED,
            track=["bedpe", "interact.bed"],
        ),
        expand("results/plots/{cell}/{figure}.png", cell=CELL_LINES, figure=list(TEST_SET_FIGURE_LABELS)),
        expand("results/plots/{cell}/{model}.training.png", cell=CELL_LINES, model=CELL_MODELS),
        expand("results/plots/pooled/{model}.training.png", model=POOLED_MODELS),
        expand("results/transfer/{model}.tsv", model=TRANSFER_MODELS),
        expand("results/plots/transfer/{model}.png", model=TRANSFER_MODELS),
        expand("results/{cell}/{model}/variants.tsv", cell=VARIANT_CELLS, model=CELL_MODELS),
        "results/plots/comparison.png",
        "results/plots/distance_bins.png",
        "results/plots/cost.png",
        "results/plots/scaling_reference.png",
        "results/summary.tsv",
        "results/summary.md",
        REPORT_TABLES,
    ]


CELL_SPAN_MODELS = PLAN.explained_span_models
SPAN_EXPLAIN_KEYS = ("span_pairs", "span_method", "steps")  # what explaining a span model reads of `explain:`


def explain_outputs():
    """The targets of `explain`: motifs and their logos for every element-window model of every cell line, and
    the attributions over the spans of every span model."""
    return [
        *expand("results/{cell}/{model}/motifs.{kind}", cell=CELL_LINES, model=ELEMENT_MODELS, kind=["tsv", "png"]),
        *expand("results/{cell}/{model}/span_segments.tsv", cell=CELL_LINES, model=CELL_SPAN_MODELS),
    ]


def explain_jaspar(wildcards):
    """The JASPAR file of explain.jaspar, as the motifs rule's input; none for the JASPAR subset the package ships."""
    return config["explain"]["jaspar"] or []


DEMO_GENERATORS = {
    # Each demo's generator and the package modules it draws from (not constants.py: the demo uses
    # only its ALPHABET, and any other edit there would re-make the demo).
    "demo": ("synthetic/demo.py", "sequence/motifs.py"),
    "demo_long": ("synthetic/demo_long.py", "synthetic/demo.py", "sequence/motifs.py"),
    "demo_scale": ("synthetic/demo_scale.py", "synthetic/demo_long.py", "synthetic/demo.py", "sequence/motifs.py"),
}


def demo_generator_checksum(demo="demo"):
    """Re-make a demo when its generator changes (Snakemake tracks the scripts, not the package)."""
    package = WORKFLOW_DIR / "src" / "epiformer"
    if not package.is_dir():  # the workflow's files without the package source: the installed package
        import epiformer

        package = Path(epiformer.__file__).parent
    sources = [package / name for name in DEMO_GENERATORS[demo]]
    missing = [str(path) for path in sources if not path.is_file()]
    if missing:  # a moved generator must not silently stop re-making the demo
        raise FileNotFoundError(f"common.smk: DEMO_GENERATORS names {', '.join(missing)}, which does not exist.")
    return hashlib.sha256(b"".join(path.read_bytes() for path in sources)).hexdigest()[:16]
