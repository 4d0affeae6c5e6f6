rule demo_data:
    output:
        genome="resources/demo/genome.fa",
        pairs_a="resources/demo/demo_a.pairs.csv",
        truth_a="resources/demo/demo_a.truth.tsv",
        pairs_b="resources/demo/demo_b.pairs.bedpe",
        truth_b="resources/demo/demo_b.truth.tsv",
    log:
        "logs/demo/demo_data.log",
    conda:
        "../../envs/genome.yaml"
    threads: 1
    resources:
        mem_mb=2000,
        runtime=15,
    params:
        spec=config.get("demo", {}),
        generator=demo_generator_checksum(),
    script:
        "../../scripts/demo_data.py"
