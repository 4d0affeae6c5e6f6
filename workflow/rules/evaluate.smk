# Validation apart from test: each model is scored on the validation split alone (rule validate), and the
# selection rule picks the M7 the run puts forward from those files and model.json only (evaluation.selection):
# no test file is among its inputs, so the choice is the same whatever the test splits hold. (The evaluate
# jobs do not wait for it: a run that targets some models' metrics then trains only those.)


rule validate:
    input:
        weights=lambda wildcards: model_weights(wildcards.cell, wildcards.model),
        description=lambda wildcards: f"{model_dir(wildcards.cell, wildcards.model)}/model.json",
        shards=lambda wildcards: get_shards(wildcards.cell, wildcards.model),
    output:
        predictions="results/{cell}/{model}/validation_predictions.tsv",
    log:
        "logs/{cell}/{model}/validate.log",
    benchmark:
        "logs/{cell}/{model}/validate.usage.tsv"
    wildcard_constraints:
        model=regex_of(MODELS),
    conda:
        "../../envs/pytorch.yaml"
    threads: 1
    resources:
        mem_mb=4000,
        runtime=60,
        gpu=lambda wildcards: scoring_gpus(wildcards.model),
    params:
        max_tokens=lambda wildcards: scoring_tokens(wildcards.model),
        device=lambda wildcards: scoring_device(wildcards.model),
    script:
        "../../scripts/validate.py"


rule selection:
    input:
        predictions=expand("results/{cell}/{model}/validation_predictions.tsv", cell=CELL_LINES, model=MODELS),
        descriptions=[f"{model_dir(cell, model)}/model.json" for cell in CELL_LINES for model in MODELS],
    output:
        "results/selection.tsv",
    log:
        "logs/selection.log",
    conda:
        "../../envs/analysis.yaml"
    threads: 1
    resources:
        mem_mb=1000,
        runtime=10,
    params:
        results=[(cell, model, model_dir(cell, model)) for cell in CELL_LINES for model in MODELS],
    script:
        "../../scripts/selection.py"


rule evaluate:
    input:
        weights=lambda wildcards: model_weights(wildcards.cell, wildcards.model),
        description=lambda wildcards: f"{model_dir(wildcards.cell, wildcards.model)}/model.json",
        shards=lambda wildcards: get_shards(wildcards.cell, wildcards.model),
        windows="results/{cell}/windows.tsv",
        validation="results/{cell}/{model}/validation_predictions.tsv",
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
