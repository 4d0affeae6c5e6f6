rule index_genome:
    input:
        fasta="{fasta}",
    output:
        fai="{fasta}.fai",
    log:
        # Beside the index, not under logs/: the {fasta} wildcard is the whole FASTA path (maybe
        # absolute), and Snakemake takes a log's path from the output's wildcards only.
        "{fasta}.fai.log",
    wildcard_constraints:
        fasta="|".join(re.escape(path) for path in config["genomes"].values()),
    conda:
        "../../envs/genome.yaml"
    threads: 1
    resources:
        mem_mb=2000,
        runtime=30,
    script:
        "../../scripts/index_genome.py"


rule windows:
    input:
        pairs=get_pairs,
        genome=get_genome,
        fai=get_genome_index,
    output:
        windows="results/{cell}/windows.tsv",
        audit="results/{cell}/split_audit.tsv",  # in the report as split_audit.html (report.smk)
        stats="results/{cell}/windows_stats.json",
    log:
        "logs/{cell}/windows.log",
    benchmark:
        "logs/{cell}/windows.usage.tsv"
    conda:
        "../../envs/genome.yaml"
    threads: 1
    resources:
        mem_mb=4000,
        runtime=60,
    params:
        windows=windows_params(),
        split=config["split"],
    script:
        "../../scripts/windows.py"
