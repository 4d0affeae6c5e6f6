rule encode:
    input:
        windows="results/{cell}/windows.tsv",
        genome=get_genome,
        pairs=get_pairs,
    output:
        shards=directory("results/{cell}/shards"),
    params:
        flank=config["augment"]["max_shift"],
        shard_size=config["encode"]["shard_size"],
    log:
        "logs/{cell}/encode.log",
    benchmark:
        "benchmarks/out/{cell}/encode.tsv"
    conda:
        "../../envs/encode.yaml"
    script:
        "../../scripts/encode.py"
