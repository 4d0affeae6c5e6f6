# One training job per (cell line, model), or per replicate of it when train.replicates > 1
# (REPLICATE in the paths; rule ensemble then writes the model folder's model.json).


rule train:
    input:
        shards=lambda wildcards: get_shards(wildcards.cell, wildcards.model),
    output:
        weights=f"results/{{cell}}/{{model}}/{REPLICATE}model.safetensors",
        description=f"results/{{cell}}/{{model}}/{REPLICATE}model.json",
        log_table=f"results/{{cell}}/{{model}}/{REPLICATE}train_log.tsv",
    log:
        f"logs/{{cell}}/{{model}}/{REPLICATE}train.log",
    benchmark:
        f"logs/{{cell}}/{{model}}/{REPLICATE}train.usage.tsv"
    wildcard_constraints:
        model=regex_of(CELL_MODELS),
        replicate=regex_of(REPLICATE_NUMBERS),
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
        weights=f"results/pooled/{{model}}/{REPLICATE}model.safetensors",
        description=f"results/pooled/{{model}}/{REPLICATE}model.json",
        log_table=f"results/pooled/{{model}}/{REPLICATE}train_log.tsv",
    log:
        f"logs/pooled/{{model}}/{REPLICATE}train.log",
    benchmark:
        f"logs/pooled/{{model}}/{REPLICATE}train.usage.tsv"
    wildcard_constraints:
        model=regex_of(POOLED_MODELS),
        replicate=regex_of(REPLICATE_NUMBERS),
    params:
        model=lambda wildcards: model_config(wildcards.model),
        train=lambda wildcards: train_params(wildcards.model, wildcards.get("replicate")),
        reverse_complement=config["augment"]["reverse_complement"],
        checkpoint_dir=lambda wildcards: checkpoint_dir(f"pooled/{wildcards.model}", wildcards),


if REPLICATES:

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
            model=regex_of(CELL_MODELS),
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
            model=regex_of(POOLED_MODELS),
