# Why pairs interact (the `explain` target, run after the main one: snakemake --cores all explain):
# attributions of each element-window model's best-scored test pairs (src/epiformer/interpret/attributions.py),
# TF-MoDISco motifs matched to JASPAR and their logos (src/epiformer/interpret/motif_discovery.py).


rule attributions:
    input:
        weights=lambda wildcards: model_weights(wildcards.cell, wildcards.model),
        description="results/{cell}/{model}/model.json",
        predictions="results/{cell}/{model}/predictions.tsv",
        windows="results/{cell}/windows.tsv",
        genome=get_genome,
        fai=get_genome_index,
    output:
        attributions="results/{cell}/{model}/attributions.safetensors",
        bigwig="results/{cell}/{model}/attributions.bw",
        agreement="results/{cell}/{model}/attribution_agreement.json",
    log:
        "logs/{cell}/{model}/attributions.log",
    benchmark:
        "logs/{cell}/{model}/attributions.usage.tsv"
    wildcard_constraints:
        model=regex_of(ELEMENT_MODELS),
    conda:
        "../../envs/pytorch.yaml"
    threads: 1
    resources:
        mem_mb=4000,
        runtime=120,
    params:
        spec={
            key: value
            for key, value in config["explain"].items()
            if key not in ("jaspar", "modisco", "span_pairs", "span_method")
        },
    script:
        "../../scripts/attributions.py"


# A span model's attributions over each explained pair's whole span (src/epiformer/interpret/span_attributions.py):
# per-segment shares and, with the long demo's truth table, how much its insulator stands out.
rule span_attributions:
    input:
        weights=lambda wildcards: model_weights(wildcards.cell, wildcards.model),
        description="results/{cell}/{model}/model.json",
        predictions="results/{cell}/{model}/predictions.tsv",
        windows="results/{cell}/windows.tsv",
        genome=get_genome,
        fai=get_genome_index,
        truth=lambda wildcards: get_truth(wildcards.cell) or [],
    output:
        attributions="results/{cell}/{model}/span_attributions.safetensors",
        bigwig="results/{cell}/{model}/attributions.bw",
        segments="results/{cell}/{model}/span_segments.tsv",
        figure=report(
            "results/{cell}/{model}/span_attributions.png",
            caption="../report/span_attributions.rst",
            category="Motifs",
            labels={"cell line": "{cell}", "model": "{model}"},
        ),
    log:
        "logs/{cell}/{model}/span_attributions.log",
    benchmark:
        "logs/{cell}/{model}/span_attributions.usage.tsv"
    wildcard_constraints:
        model=regex_of(CELL_SPAN_MODELS),
    conda:
        "../../envs/pytorch.yaml"
    threads: 1
    resources:
        mem_mb=4000,
        runtime=120,
    params:
        spec={key: config["explain"][key] for key in SPAN_EXPLAIN_KEYS},
    script:
        "../../scripts/span_attributions.py"


rule motifs:
    input:
        attributions="results/{cell}/{model}/attributions.safetensors",
        jaspar=explain_jaspar,
    output:
        motifs="results/{cell}/{model}/motifs.tsv",
        logos=report(
            "results/{cell}/{model}/motifs.png",
            caption="../report/motifs.rst",
            category="Motifs",
            labels={"cell line": "{cell}", "model": "{model}"},
        ),
    log:
        "logs/{cell}/{model}/motifs.log",
    benchmark:
        "logs/{cell}/{model}/motifs.usage.tsv"
    wildcard_constraints:
        model=regex_of(ELEMENT_MODELS),
    conda:
        "../../envs/explain.yaml"
    threads: 1
    resources:
        mem_mb=4000,
        runtime=60,
    params:
        modisco=config["explain"]["modisco"],
    script:
        "../../scripts/motifs.py"


rule explain:
    input:
        explain_outputs(),
