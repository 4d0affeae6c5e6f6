rule encode:
    input:
        windows="results/{cell}/windows.tsv",
        report="results/{cell}/windows_report.json",
        genome=get_genome,
        fai=get_genome_index,
        pairs=get_pairs,
    output:
        shards=directory("results/{cell}/shards"),
    params:
        flank=config["augment"]["max_shift"],
        shard_size=config["encode"]["shard_size"],
    threads: 2
    log:
        "logs/{cell}/encode.log",
    benchmark:
        "benchmarks/out/{cell}/encode.tsv"
    conda:
        "../../envs/encode.yaml"
    script:
        "../../scripts/encode.py"
