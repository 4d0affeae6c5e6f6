rule evaluate:
    input:
        weights=lambda wildcards: model_weights(wildcards.cell, wildcards.model),
        description=lambda wildcards: f"{model_dir(wildcards.cell, wildcards.model)}/model.json",
        shards=lambda wildcards: get_shards(wildcards.cell, wildcards.model),
        windows="results/{cell}/windows.tsv",
    output:
        predictions="results/{cell}/{model}/predictions.tsv",
        metrics="results/{cell}/{model}/metrics.json",
        replicates=[],  # each replicate's, for a replicated model (evaluate_replicated)
    log:
        "logs/{cell}/{model}/evaluate.log",
    benchmark:
        "logs/{cell}/{model}/evaluate.usage.tsv"
    wildcard_constraints:
        model=regex_of([name for name in MODELS if name not in REPLICATED_MODELS]),
    conda:
        "../../envs/pytorch.yaml"
    threads: 1
    resources:
        mem_mb=4000,
        runtime=60,
        gpu=lambda wildcards: scoring_gpus(wildcards.model),
    params:
        bootstrap=config["evaluate"]["bootstrap"],
        bootstrap_unit=config["evaluate"]["bootstrap_unit"],
        seed=config["evaluate"]["seed"],
        max_tokens=lambda wildcards: scoring_tokens(wildcards.model),
        device=lambda wildcards: scoring_device(wildcards.model),
    script:
        "../../scripts/evaluate.py"


use rule evaluate as evaluate_replicated with:
    output:
        predictions="results/{cell}/{model}/predictions.tsv",
        metrics="results/{cell}/{model}/metrics.json",
        replicates=[f"results/{{cell}}/{{model}}/{name}/predictions.tsv" for name in REPLICATES],
    wildcard_constraints:
        model=regex_of(REPLICATED_MODELS),
