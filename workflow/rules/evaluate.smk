rule evaluate:
    input:
        weights="results/{cell}/{model}/model.safetensors",
        description="results/{cell}/{model}/model.json",
        shards="results/{cell}/shards",
    output:
        predictions="results/{cell}/{model}/predictions.tsv",
        metrics="results/{cell}/{model}/metrics.json",
    log:
        "logs/{cell}/{model}/evaluate.log",
    conda:
        "../../envs/train.yaml"
    params:
        bootstrap=config["evaluate"]["bootstrap"],
        seed=config["evaluate"]["seed"],
    script:
        "../../scripts/evaluate.py"
