rule windows:
    input:
        pairs=get_pairs,
        genome=get_genome,
    output:
        windows="results/{cell}/windows.tsv",
        audit="results/{cell}/split_audit.tsv",
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
