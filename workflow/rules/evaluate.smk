rule evaluate:
    input:
        weights="results/{cell}/{model}/model.safetensors",
        description="results/{cell}/{model}/model.json",
        shards="results/{cell}/shards",
    output:
        predictions="results/{cell}/{model}/predictions.tsv",
        metrics="results/{cell}/{model}/metrics.json",
    params:
        bootstrap=config["evaluate"]["bootstrap"],
        seed=config["evaluate"]["seed"],
    log:
        "logs/{cell}/{model}/evaluate.log",
    conda:
        "../../envs/train.yaml"
    script:
        "../../scripts/evaluate.py"
