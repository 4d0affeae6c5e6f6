rule train:
    input:
        shards="results/{cell}/shards",
    output:
        weights="results/{cell}/{model}/model.safetensors",
        description="results/{cell}/{model}/model.json",
        log_table="results/{cell}/{model}/train_log.tsv",
    params:
        model=lambda wildcards: config["models"][wildcards.model],
        train=config["train"],
        augment=config["augment"],
        # Kept outside the declared outputs: Snakemake deletes a failed job's outputs,
        # and this checkpoint must survive so that a re-run resumes.
        checkpoint_dir=lambda wildcards: f".epiformer-checkpoints/{wildcards.cell}/{wildcards.model}",
    threads: config["train"]["threads"]
    resources:
        mem_mb=config["train"]["mem_mb"],
        runtime=config["train"]["runtime"],
    log:
        "logs/{cell}/{model}/train.log",
    benchmark:
        "benchmarks/out/{cell}/{model}/train.tsv"
    conda:
        "../../envs/train.yaml"
    script:
        "../../scripts/train.py"
