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
    priority: ENCODING_PRIORITY  # before the trainings (training.schedule)
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


# The genome one-hot encoded once (data.genome_store), shared by every cell line and span model of
# that genome: span shards hold coordinates, and their bases are cut from it.
rule genome_store:
    input:
        fasta=lambda wildcards: config["genomes"][wildcards.genome],
        fai=lambda wildcards: config["genomes"][wildcards.genome] + ".fai",
    output:
        store=directory("results/genomes/{genome}/store"),
    log:
        "logs/genomes/{genome}/store.log",
    benchmark:
        "logs/genomes/{genome}/store.usage.tsv"
    wildcard_constraints:
        genome="|".join(re.escape(name) for name in config["genomes"]),
    conda:
        "../../envs/encode.yaml"
    threads: 1
    resources:
        mem_mb=1000,  # one 16 Mb block at a time, whatever the genome's size
        runtime=60,
    script:
        "../../scripts/genome_store.py"


# One span a pair, from the first element window to the second (models with input: span).
rule encode_spans:
    input:
        windows="results/{cell}/windows.tsv",
        stats="results/{cell}/windows_stats.json",
        genome_store=get_genome_store,
        pairs=get_pairs,
    output:
        shards=directory("results/{cell}/span_shards"),
    log:
        "logs/{cell}/encode_spans.log",
    benchmark:
        "logs/{cell}/encode_spans.usage.tsv"
    priority: ENCODING_PRIORITY
    conda:
        "../../envs/encode.yaml"
    threads: 2
    resources:
        mem_mb=2000,
        runtime=60,
    params:
        kind="span",
        flank=config["augment"]["max_shift"],
        shard_size=config["encode"]["shard_size"],
    script:
        "../../scripts/encode.py"
