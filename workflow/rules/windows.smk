rule index_genome:
    input:
        fasta="{fasta}",
    output:
        fai="{fasta}.fai",
    wildcard_constraints:
        fasta="|".join(re.escape(path) for path in config["genomes"].values()),
    log:
        "logs/index_genome/{fasta}.log",
    conda:
        "../../envs/genome.yaml"
    script:
        "../../scripts/index_genome.py"


rule windows:
    input:
        pairs=get_pairs,
        genome=get_genome,
        fai=get_genome_index,
    output:
        windows="results/{cell}/windows.tsv",
        audit=report(
            "results/{cell}/split_audit.tsv",
            caption="../report/split_audit.rst",
            category="Data",
            labels={"cell line": "{cell}", "table": "split audit"},
        ),
        report="results/{cell}/windows_report.json",
    params:
        windows=config["windows"],
        split=config["split"],
    log:
        "logs/{cell}/windows.log",
    conda:
        "../../envs/genome.yaml"
    script:
        "../../scripts/windows.py"
