rule variants:
    input:
        weights=lambda wildcards: model_weights(wildcards.cell, wildcards.model),
        description="results/{cell}/{model}/model.json",
        genome=get_genome,
        fai=get_genome_index,
        pairs=get_pairs,
        vcf=get_vcf,
    output:
        variants="results/{cell}/{model}/variants.tsv",
        unscored="results/{cell}/{model}/variants.unscored.tsv",
    log:
        "logs/{cell}/{model}/variants.log",
    benchmark:
        "logs/{cell}/{model}/variants.usage.tsv"
    wildcard_constraints:
        cell=regex_of(VARIANT_CELLS),
        model=regex_of(CELL_MODELS),
    conda:
        "../../envs/pytorch.yaml"
    threads: 1
    resources:
        mem_mb=4000,
        runtime=60,
    script:
        "../../scripts/variants.py"
