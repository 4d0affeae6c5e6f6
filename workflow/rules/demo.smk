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


# The insulated long-range demo (`make demo-long`, config/demo_long.yaml): one cell line whose
# answer needs the sequence between enhancer and promoter (docs/demo_long.md).
rule demo_long_data:
    output:
        genome="resources/demo_long/genome.fa",
        pairs="resources/demo_long/demo_long.pairs.csv",
        truth="resources/demo_long/demo_long.truth.tsv",
        ceiling="resources/demo_long/demo_long.ceiling.json",
    log:
        "logs/demo/demo_long_data.log",
    conda:
        "../../envs/analysis.yaml"
    threads: 1
    resources:
        mem_mb=4000,
        runtime=15,
    params:
        spec=config.get("demo_long", {}),
        generator=demo_generator_checksum("demo_long"),
    script:
        "../../scripts/demo_long_data.py"


# The demo at real distances (`make demo-scale`, config/demo_scale.yaml): spans of 25 kb to 1.9 Mb
# across insulated domains (docs/demo_scale.md).
rule demo_scale_data:
    output:
        genome="resources/demo_scale/genome.fa",
        pairs="resources/demo_scale/demo_scale.pairs.csv",
        truth="resources/demo_scale/demo_scale.truth.tsv",
        ceiling="resources/demo_scale/demo_scale.ceiling.json",
    log:
        "logs/demo/demo_scale_data.log",
    conda:
        "../../envs/analysis.yaml"
    threads: 1
    resources:
        mem_mb=6000,
        runtime=30,
    params:
        spec=config.get("demo_scale", {}),
        generator=demo_generator_checksum("demo_scale"),
    script:
        "../../scripts/demo_scale_data.py"
