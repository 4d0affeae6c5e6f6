rule encode:
    input:
        windows="results/{cell}/windows.tsv",
        stats="results/{cell}/windows_stats.json",
        genome=get_genome,
        fai=get_genome_index,
        pairs=get_pairs,
    output:
        shards=directory("results/{cell}/shards"),
    log:
        "logs/{cell}/encode.log",
    benchmark:
        "logs/{cell}/encode.usage.tsv"
    conda:
        "../../envs/encode.yaml"
    threads: 2
    resources:
        mem_mb=4000,
        runtime=60,
    params:
        kind="windows",
        flank=config["augment"]["max_shift"],
        shard_size=config["encode"]["shard_size"],
    script:
        "../../scripts/encode.py"


# One sequence per pair from the first element window to the second (models with input: span).
use rule encode as encode_spans with:
    output:
        shards=directory("results/{cell}/span_shards"),
    log:
        "logs/{cell}/encode_spans.log",
    benchmark:
        "logs/{cell}/encode_spans.usage.tsv"
    params:
        kind="span",
        flank=config["augment"]["max_shift"],
        shard_size=config["encode"]["shard_size"],
