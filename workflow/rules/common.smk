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
    from epiformer.data.windows import WindowSpec
    from epiformer.constants import BASELINES as BASELINE_NAMES, POOLED_SUFFIX
    from epiformer.io.configfile import RESERVED_CELL_NAMES, check_folder_names, check_numbers, schema_error_in_brief
    from epiformer.model.configs import (
        ModelConfig,
        TrainConfig,
        architecture,
        with_length_controls,
        with_span_positions,
    )
    from epiformer.training.replicates import replicate_names
    from epiformer.training.schedule import ENCODING_PRIORITY, training_priorities
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
# Every span model beside its length control (config key length_control), as a model of its own.
config["models"] = with_length_controls(config["models"], config["length_control"])

samples = pd.read_csv(config["samples"], sep="\t", dtype=str, comment="#").fillna("")
if samples.empty:
    raise ValueError(
        f"{config['samples']}: the sample sheet lists no cell line. Add a row a cell line, tab-separated under "
        "the header `cell_line  pairs  genome` (README, 'Your own genome and cell lines')."
    )
if "cell_line" in samples.columns:  # a clear message before the schema's
    check_folder_names(samples["cell_line"], "cell line", config["samples"], RESERVED_CELL_NAMES)
try:
    validate(samples, schema="../schemas/samples.schema.yaml")
except WorkflowError as error:
    raise schema_error_in_brief(error, f"sample sheet {config['samples']}") from None
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
    if not config["genomes"][_row.genome].strip():
        # An overlay for a genome the user brings (config/crispri.yaml) leaves its path empty.
        raise ValueError(
            f"genomes: {_row.genome!r} (cell line {_row.cell_line!r} in {config['samples']}) has no FASTA path. "
            f"Give yours: snakemake ... --config 'genomes={{{_row.genome}: /path/to/{_row.genome}.fa}}' "
            "(plain or bgzip FASTA), or set it in a config file."
        )
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
samples = samples.set_index("cell_line", drop=False)

CELL_LINES = list(samples.index)
MODELS = list(config["models"])
BASELINES = list(config["baselines"]["names"])
# A pooled model is trained once on every cell line (results/pooled/{model}/) and evaluated on each; beside
# pooled models, each baseline is also fitted pooled, so that they meet a peer that saw the same pairs.
POOLED_MODELS = [name for name in MODELS if config["models"][name].get("pooled", False)]
POOLED_BASELINES = [name + POOLED_SUFFIX for name in BASELINES] if POOLED_MODELS else []
EVALUATED = MODELS + BASELINES + POOLED_BASELINES  # every table and plot shows models and baselines side by side
CELL_MODELS = [name for name in MODELS if name not in POOLED_MODELS]
# A model of one cell line scored on every other's test pairs (results/transfer/): with a sheet of one
# cell line that matrix is the model's own test AUROC again, at the cost of scoring it again.
TRANSFER_MODELS = CELL_MODELS if len(CELL_LINES) > 1 else []
if set(MODELS) & set(BASELINES):
    raise ValueError(
        f"models: {', '.join(sorted(set(MODELS) & set(BASELINES)))} is also a baseline's name; "
        "rename the model (results/{cell}/{name}/ would hold both)."
    )


def model_config(model):
    """The model's architecture, as ModelConfig's keyword arguments (`configs.architecture`: less `pooled` and
    `replicates`, which say how it is trained); a span model's positions reach over the longest span
    windows.max_span allows."""
    return with_span_positions(architecture(config["models"][model]), config["windows"]["max_span"])


SPAN_MODELS = [name for name in MODELS if model_config(name).get("input") == "span"]


TRAINING_PRIORITIES = training_priorities(config["models"], config["train"])


def training_priority(wildcards):
    """Trainings before other jobs when cores are short, the longest first (`training.schedule`)."""
    return TRAINING_PRIORITIES[wildcards.model]


# Variant effects (the variants rule; `epiformer variants`): for each cell line whose sample sheet row
# gives a `vcf`, by each of its own models (a span model scores a variant anywhere in a pair's span).
VARIANT_CELLS = [cell for cell in CELL_LINES if "vcf" in samples.columns and samples.loc[cell, "vcf"]]
# Models of one cell line that read element windows: what explain takes.
ELEMENT_MODELS = [name for name in CELL_MODELS if name not in SPAN_MODELS]


def windows_params():
    """The windows stage's settings (WindowSpec): `max_span` only when some model reads spans.

    Without span models no pair is dropped for its span (max_span None), and changing
    `windows.max_span` re-runs nothing.
    """
    return {**config["windows"], "max_span": config["windows"]["max_span"] if SPAN_MODELS else None}


SPAN_ONLY_TRAIN_KEYS = ("max_tokens_per_batch",)
# Replicates (train.replicates, or a model's own `replicates`, > 1): each (cell line, model) is
# trained once per replicate, in {model folder}/replicates/{1..N}/, and its folder holds the
# ensemble's model.json (rule ensemble). One N for every replicated model of a run.


def replicate_count(model):
    """How many times a model is trained: its own `replicates`, else train.replicates."""
    return int(config["models"][model].get("replicates", config["train"].get("replicates", 1)))


REPLICATED_MODELS = [name for name in MODELS if replicate_count(name) > 1]
_counts = {name: replicate_count(name) for name in REPLICATED_MODELS}
if len(set(_counts.values())) > 1:
    raise ValueError(
        "models: replicated models must share one replicate count (a model's `replicates`, else train.replicates): "
        + ", ".join(f"{name} {count}" for name, count in _counts.items())
        + ". Give each either that count or replicates: 1."
    )
REPLICATES = replicate_names(max(_counts.values(), default=1))  # folder names of a replicated model's replicates
REPLICATE_NUMBERS = [str(number) for number in range(1, len(REPLICATES) + 1)]  # the {replicate} wildcard's values


def replicates_of(model):
    """A model's replicate folders, relative to its folder: REPLICATES if it is replicated, else none."""
    return REPLICATES if model in REPLICATED_MODELS else []


def checkpoint_dir(folder, wildcards):
    """Where a training job keeps its checkpoint (outside the outputs, which a failed job loses): one per replicate."""
    replicate = [f"replicates/{wildcards.replicate}"] if wildcards.get("replicate") else []
    return os.path.join(".epiformer-checkpoints", folder, *replicate)


def train_params(model, replicate=None):
    """The train: block one training job reads: span-only keys left out for element models, `replicates` left
    out (the count changes the folders, not a replicate's training) and the replicate's seed (so changing
    either re-runs nothing it does not change)."""
    skip = ("replicates",) + (() if model in SPAN_MODELS else SPAN_ONLY_TRAIN_KEYS)
    params = {key: value for key, value in config["train"].items() if key not in skip}
    if "max_tokens" in config["models"][model]:  # the model's own budget
        params["max_tokens"] = config["models"][model]["max_tokens"]
    if replicate is not None:
        params["seed"] = TRAIN_CONFIG.replicate_seed(int(replicate))
    return params


def model_weights(cell, model):
    """The weight files a model folder loads: its model.safetensors, or each replicate's."""
    folder = model_dir(cell, model)
    return [f"{folder}/{name}/model.safetensors" for name in replicates_of(model)] or [f"{folder}/model.safetensors"]


def train_logs(folder, model):
    """The training logs of a model's folder: its own, or each replicate's."""
    return [f"{folder}/{name}/train_log.tsv" for name in replicates_of(model)] or [f"{folder}/train_log.tsv"]


def scoring_tokens(model):
    """Model tokens a span batch may hold when scoring (TrainConfig.scoring_tokens); 0 for element models."""
    return TRAIN_CONFIG.scoring_tokens if model in SPAN_MODELS else 0


def scoring_device(model):
    """Where a model's evaluation and transfer run: a span model where it trained (train.device: a GPU when
    there is one; long spans make scoring as costly as an epoch), an element model on the CPU."""
    return config["train"]["device"] if model in SPAN_MODELS else "cpu"


def scoring_gpus(model):
    """GPUs a scoring job of `model` asks the cluster for: one where it scores on a GPU."""
    return 0 if scoring_device(model) == "cpu" else 1


def get_shards(cell, model):
    """The shard folder a model reads: span shards for span models, window shards otherwise."""
    return f"results/{cell}/span_shards" if model in SPAN_MODELS else f"results/{cell}/shards"


for _name in MODELS:
    try:
        ModelConfig(**model_config(_name))
    except (TypeError, ValueError) as error:
        raise ValueError(f"models: {_name}: {error}. Fix that model's settings in the config.") from None
try:
    TRAIN_CONFIG = TrainConfig(**config["train"], reverse_complement=config["augment"]["reverse_complement"])
except (TypeError, ValueError) as error:
    raise ValueError(f"train: {error}. Fix it in the config.") from None
for _name in POOLED_MODELS:
    if _name in SPAN_MODELS:
        raise ValueError(
            f"models: {_name!r} reads spans and is pooled; span models are trained per cell line for now "
            "(set pooled: false, or input: elements)."
        )
try:
    WindowSpec(**windows_params())
    SplitSpec.from_config(config["split"]).check()
except ValueError as error:
    raise ValueError(f"{error} (config)") from None
for _genome, _fasta in config["genomes"].items():
    # Held-out chromosomes the genome lacks, where its index exists already (a genome made by the
    # workflow is checked by the windows job).
    if _genome in set(samples["genome"]) and fai_path(_fasta).is_file():
        SplitSpec.from_config(config["split"]).check(read_chrom_sizes(fai_path(_fasta)), f"genome {_genome} ({_fasta})")


def sequence_only_twin(name):
    """The model that differs from `name` only in `distance`, if the config has one."""

    def settings(model):  # every setting, defaults included, and what it is trained on
        pooled = config["models"][model].get("pooled", False)
        return {**ModelConfig(**model_config(model)).to_dict(), "pooled": pooled, "distance": False}

    twins = [other for other in MODELS if settings(other) == settings(name)]
    return next((other for other in twins if not config["models"][other].get("distance", False)), None)


for _name in MODELS:
    if config["models"][_name].get("distance", False) and sequence_only_twin(_name) is None:
        raise ValueError(
            f"models: {_name!r} is given the genomic distance, but no model has the same settings without it. "
            "Add that sequence-only twin (e.g. a copy of the entry with distance: false): a distance-aware "
            "model is reported only beside the sequence-only model, to show what the distance adds."
        )


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


def model_dir(cell, model):
    """Where a model's weights and model.json are: its own per cell line, or the one pooled model."""
    return f"results/pooled/{model}" if model in POOLED_MODELS else f"results/{cell}/{model}"


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


# Models of one cell line that read spans: explained over the whole span (rule span_attributions).
# A length control reads shuffled sequence between its elements: nothing there to explain.
CELL_SPAN_MODELS = [
    name for name in CELL_MODELS if name in SPAN_MODELS and ModelConfig(**model_config(name)).between == "sequence"
]
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
