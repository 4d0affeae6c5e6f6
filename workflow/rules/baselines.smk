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


# Beside pooled models: each baseline fitted once on every cell line's train split, as they are trained, and
# scored on each cell line's test pairs (results/{cell}/{baseline}_pooled/).
rule pooled_baseline:
    input:
        windows=expand("results/{cell}/windows.tsv", cell=CELL_LINES),
        shards=expand("results/{cell}/shards", cell=CELL_LINES),
    output:
        predictions=expand("results/{cell}/{{baseline}}_pooled/predictions.tsv", cell=CELL_LINES),
        metrics=expand("results/{cell}/{{baseline}}_pooled/metrics.json", cell=CELL_LINES),
    log:
        "logs/pooled/{baseline}_pooled/baseline.log",
    benchmark:
        "logs/pooled/{baseline}_pooled/baseline.usage.tsv"
    conda:
        "../../envs/analysis.yaml"
    threads: 1
    resources:
        mem_mb=8000,
        runtime=120,
    params:
        cells=CELL_LINES,
        kmer_size=config["baselines"]["kmer_size"],
        pseudo_pairs=config["baselines"]["pseudo_pairs"],
        bootstrap=config["evaluate"]["bootstrap"],
        bootstrap_unit=config["evaluate"]["bootstrap_unit"],
        seed=config["evaluate"]["seed"],
    script:
        "../../scripts/baselines.py"
