# One training job per (cell line, model), or per replicate of a replicated model (REPLICATED_MODELS:
# train.replicates or the model's own `replicates` > 1; rule ensemble then writes its folder's model.json).


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
        model=regex_of([name for name in CELL_MODELS if name not in REPLICATED_MODELS]),
    # Trainings, the longest jobs, first when cores are short: a training's evaluation then runs
    # beside the other trainings instead of holding a core one of them waits for (training_priority).
    priority: training_priority
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
        train=lambda wildcards: train_params(wildcards.model, wildcards.get("replicate")),  # threads: per process
        reverse_complement=config["augment"]["reverse_complement"],
        # Kept outside the declared outputs: Snakemake deletes a failed job's outputs,
        # and this checkpoint must survive so that a re-run resumes.
        checkpoint_dir=lambda wildcards: checkpoint_dir(f"{wildcards.cell}/{wildcards.model}", wildcards),
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
        model=regex_of([name for name in POOLED_MODELS if name not in REPLICATED_MODELS]),
    params:
        model=lambda wildcards: model_config(wildcards.model),
        train=lambda wildcards: train_params(wildcards.model, wildcards.get("replicate")),
        reverse_complement=config["augment"]["reverse_complement"],
        checkpoint_dir=lambda wildcards: checkpoint_dir(f"pooled/{wildcards.model}", wildcards),


# One replicate of a replicated model: the same job in the model folder's replicates/{1..N}/.
use rule train as train_replicate with:
    output:
        weights="results/{cell}/{model}/replicates/{replicate}/model.safetensors",
        description="results/{cell}/{model}/replicates/{replicate}/model.json",
        log_table="results/{cell}/{model}/replicates/{replicate}/train_log.tsv",
    log:
        "logs/{cell}/{model}/replicates/{replicate}/train.log",
    benchmark:
        "logs/{cell}/{model}/replicates/{replicate}/train.usage.tsv"
    wildcard_constraints:
        model=regex_of([name for name in CELL_MODELS if name in REPLICATED_MODELS]),
        replicate=regex_of(REPLICATE_NUMBERS),


use rule train_pooled as train_pooled_replicate with:
    output:
        weights="results/pooled/{model}/replicates/{replicate}/model.safetensors",
        description="results/pooled/{model}/replicates/{replicate}/model.json",
        log_table="results/pooled/{model}/replicates/{replicate}/train_log.tsv",
    log:
        "logs/pooled/{model}/replicates/{replicate}/train.log",
    benchmark:
        "logs/pooled/{model}/replicates/{replicate}/train.usage.tsv"
    wildcard_constraints:
        model=regex_of([name for name in POOLED_MODELS if name in REPLICATED_MODELS]),
        replicate=regex_of(REPLICATE_NUMBERS),


if REPLICATED_MODELS:

    # The ensemble of a model's replicates: its model.json (training/replicates.py), which every
    # tool that loads a model folder reads as the replicates' mean probability.
    rule ensemble:
        input:
            descriptions=lambda wildcards: [
                f"results/{wildcards.cell}/{wildcards.model}/{name}/model.json" for name in REPLICATES
            ],
        output:
            description="results/{cell}/{model}/model.json",
        log:
            "logs/{cell}/{model}/ensemble.log",
        wildcard_constraints:
            model=regex_of([name for name in CELL_MODELS if name in REPLICATED_MODELS]),
        conda:
            "../../envs/analysis.yaml"
        threads: 1
        resources:
            mem_mb=1000,
            runtime=5,
        script:
            "../../scripts/ensemble.py"

    use rule ensemble as ensemble_pooled with:
        input:
            descriptions=lambda wildcards: [
                f"results/pooled/{wildcards.model}/{name}/model.json" for name in REPLICATES
            ],
        output:
            description="results/pooled/{model}/model.json",
        log:
            "logs/pooled/{model}/ensemble.log",
        wildcard_constraints:
            model=regex_of([name for name in POOLED_MODELS if name in REPLICATED_MODELS]),
