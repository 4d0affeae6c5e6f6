rule transfer:
    input:
        weights=lambda wildcards: [path for cell in CELL_LINES for path in model_weights(cell, wildcards.model)],
        descriptions=expand("results/{cell}/{{model}}/model.json", cell=CELL_LINES),
        shards=lambda wildcards: [get_shards(cell, wildcards.model) for cell in CELL_LINES],
    output:
        table="results/transfer/{model}.tsv",
    log:
        "logs/transfer/{model}.log",
    benchmark:
        "logs/transfer/{model}.usage.tsv"
    wildcard_constraints:
        model=regex_of(CELL_MODELS),  # a pooled model was trained on every cell line: nothing to transfer
    conda:
        "../../envs/pytorch.yaml"
    threads: 1
    resources:
        mem_mb=4000,
        runtime=60,
        gpu=lambda wildcards: scoring_gpus(wildcards.model),
    params:
        cells=CELL_LINES,
        max_tokens=lambda wildcards: scoring_tokens(wildcards.model),
        device=lambda wildcards: scoring_device(wildcards.model),
    script:
        "../../scripts/transfer.py"
