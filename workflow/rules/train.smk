rule train:
    input:
        shards="results/{cell}/shards",
    output:
        weights="results/{cell}/{model}/model.safetensors",
        description="results/{cell}/{model}/model.json",
        log_table="results/{cell}/{model}/train_log.tsv",
    log:
        "logs/{cell}/{model}/train.log",
    benchmark:
        "benchmarks/out/{cell}/{model}/train.tsv"
    conda:
        "../../envs/train.yaml"
    # One set of threads per data-parallel process, and one GPU each unless device is cpu
    # (a cluster without GPUs: set train.device: cpu).
    threads: config["train"]["threads"] * config["train"]["devices"]
    resources:
        mem_mb=config["train"]["mem_mb"] * config["train"]["devices"],
        runtime=config["train"]["runtime"],
        gpu=config["train"]["devices"] if config["train"]["device"] != "cpu" else 0,
    params:
        model=lambda wildcards: config["models"][wildcards.model],
        train=config["train"],
        augment=config["augment"],
        # Kept outside the declared outputs: Snakemake deletes a failed job's outputs,
        # and this checkpoint must survive so that a re-run resumes.
        checkpoint_dir=lambda wildcards: f".epiformer-checkpoints/{wildcards.cell}/{wildcards.model}",
    script:
        "../../scripts/train.py"
