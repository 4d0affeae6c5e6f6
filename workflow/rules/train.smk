rule train:
    input:
        shards=lambda wildcards: get_shards(wildcards.cell, wildcards.model),
    output:
        weights="results/{cell}/{model}/model.safetensors",
        description="results/{cell}/{model}/model.json",
        log_table="results/{cell}/{model}/train_log.tsv",
    log:
        "logs/{cell}/{model}/train.log",
    benchmark:
        "logs/{cell}/{model}/train.usage.tsv"
    wildcard_constraints:
        model=regex_of(CELL_MODELS),
    conda:
        "../../envs/pytorch.yaml"
    # One set of threads per data-parallel process, and one GPU each unless device is cpu
    # (a cluster without GPUs: set train.device: cpu).
    threads: config["train"]["threads"] * config["train"]["devices"]
    resources:
        mem_mb=config["resources"]["train"]["mem_mb"] * config["train"]["devices"],
        runtime=config["resources"]["train"]["runtime"],
        gpu=config["train"]["devices"] if config["train"]["device"] != "cpu" else 0,
    params:
        model=lambda wildcards: model_config(wildcards.model),
        train=lambda wildcards: train_params(wildcards.model),  # threads: per process
        reverse_complement=config["augment"]["reverse_complement"],
        # Kept outside the declared outputs: Snakemake deletes a failed job's outputs,
        # and this checkpoint must survive so that a re-run resumes.
        checkpoint_dir=lambda wildcards: f".epiformer-checkpoints/{wildcards.cell}/{wildcards.model}",
    script:
        "../../scripts/train.py"


# A model with `pooled: true`: one training on every cell line's train split (selected on
# all validation splits), evaluated on each cell line's own test split.
use rule train as train_pooled with:
    input:
        shards=expand("results/{cell}/shards", cell=CELL_LINES),
    output:
        weights="results/pooled/{model}/model.safetensors",
        description="results/pooled/{model}/model.json",
        log_table="results/pooled/{model}/train_log.tsv",
    log:
        "logs/pooled/{model}/train.log",
    benchmark:
        "logs/pooled/{model}/train.usage.tsv"
    wildcard_constraints:
        model=regex_of(POOLED_MODELS),
    params:
        model=lambda wildcards: model_config(wildcards.model),
        train=lambda wildcards: train_params(wildcards.model),
        reverse_complement=config["augment"]["reverse_complement"],
        checkpoint_dir=lambda wildcards: f".epiformer-checkpoints/pooled/{wildcards.model}",
