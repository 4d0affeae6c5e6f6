rule baseline:
    input:
        windows="results/{cell}/windows.tsv",
        shards="results/{cell}/shards",
    output:
        predictions="results/{cell}/{baseline}/predictions.tsv",
        metrics="results/{cell}/{baseline}/metrics.json",
    log:
        "logs/{cell}/{baseline}/baseline.log",
    benchmark:
        "logs/{cell}/{baseline}/baseline.usage.tsv"
    conda:
        "../../envs/analysis.yaml"
    threads: 1
    resources:
        mem_mb=4000,
        runtime=60,
    params:
        kmer_size=config["baselines"]["kmer_size"],
        pseudo_pairs=config["baselines"]["pseudo_pairs"],
        bootstrap=config["evaluate"]["bootstrap"],
        bootstrap_unit=config["evaluate"]["bootstrap_unit"],
        seed=config["evaluate"]["seed"],
    script:
        "../../scripts/baselines.py"
