# Figures: PNG for the report, SVG beside each for papers (src/epiformer/evaluation/plots.py draws them).


# The test-set figures of one cell line: file name -> its label in the report.
TEST_SET_FIGURE_LABELS = {"roc_pr": "ROC and PR", "calibration": "calibration"}


rule plot_test_set:
    input:
        predictions=expand("results/{{cell}}/{model}/predictions.tsv", model=EVALUATED),
        metrics=expand("results/{{cell}}/{model}/metrics.json", model=EVALUATED),
    output:
        png=report(
            "results/plots/{cell}/{figure}.png",
            caption="../report/test_set.rst",
            category="Test-set curves",
            labels=lambda wildcards: {"cell line": wildcards.cell, "figure": TEST_SET_FIGURE_LABELS[wildcards.figure]},
        ),
        svg="results/plots/{cell}/{figure}.svg",
    log:
        "logs/{cell}/plot_{figure}.log",
    wildcard_constraints:
        figure=regex_of(TEST_SET_FIGURE_LABELS),
    conda:
        "../../envs/analysis.yaml"
    threads: 1
    resources:
        mem_mb=2000,
        runtime=10,
    params:
        models=EVALUATED,
    script:
        "../../scripts/plot_test_set.py"


rule plot_training:
    input:
        log_tables=lambda wildcards: train_logs(f"results/{wildcards.cell}/{wildcards.model}", wildcards.model),
        description="results/{cell}/{model}/model.json",
    output:
        png=report(
            "results/plots/{cell}/{model}.training.png",
            caption="../report/training.rst",
            category="Training curves",
            labels={"cell line": "{cell}", "model": "{model}"},
        ),
        svg="results/plots/{cell}/{model}.training.svg",
    log:
        "logs/{cell}/{model}/plot_training.log",
    conda:
        "../../envs/analysis.yaml"
    threads: 1
    resources:
        mem_mb=2000,
        runtime=10,
    params:
        trained_on=lambda wildcards: f"cell line {wildcards.cell}",
    script:
        "../../scripts/plot_training.py"


use rule plot_training as plot_training_pooled with:
    input:
        log_tables=lambda wildcards: train_logs(f"results/pooled/{wildcards.model}", wildcards.model),
        description="results/pooled/{model}/model.json",
    output:
        png=report(
            "results/plots/pooled/{model}.training.png",
            caption="../report/training.rst",
            category="Training curves",
            labels={"cell line": "all (pooled)", "model": "{model}"},
        ),
        svg="results/plots/pooled/{model}.training.svg",
    log:
        "logs/pooled/{model}/plot_training.log",
    params:
        trained_on="all cell lines (pooled)",


rule plot_transfer:
    input:
        table="results/transfer/{model}.tsv",
    output:
        png=report(
            "results/plots/transfer/{model}.png",
            caption="../report/transfer.rst",
            category="Transfer across cell lines",
            labels={"model": "{model}", "figure": "heatmap"},
        ),
        svg="results/plots/transfer/{model}.svg",
    log:
        "logs/transfer/plot_{model}.log",
    conda:
        "../../envs/analysis.yaml"
    threads: 1
    resources:
        mem_mb=2000,
        runtime=10,
    script:
        "../../scripts/plot_transfer.py"


rule plot_comparison:
    input:
        summary="results/summary.tsv",
    output:
        png=report(
            "results/plots/comparison.png",
            caption="../report/comparison.rst",
            category="Summary",
            labels={"figure": "model comparison"},
        ),
        svg="results/plots/comparison.svg",
    log:
        "logs/plot_comparison.log",
    conda:
        "../../envs/analysis.yaml"
    threads: 1
    resources:
        mem_mb=2000,
        runtime=10,
    script:
        "../../scripts/plot_comparison.py"


rule plot_cost:
    input:
        summary="results/summary.tsv",
    output:
        png=report(
            "results/plots/cost.png",
            caption="../report/cost.rst",
            category="Summary",
            labels={"figure": "accuracy against training cost"},
        ),
        svg="results/plots/cost.svg",
    log:
        "logs/plot_cost.log",
    conda:
        "../../envs/analysis.yaml"
    threads: 1
    resources:
        mem_mb=2000,
        runtime=10,
    script:
        "../../scripts/plot_cost.py"


rule plot_scaling_reference:
    input:
        # Shipped with the workflow: found beside this file, not in the working directory.
        table=workflow.source_path("../../docs/scaling_cpu.tsv"),
    output:
        png=report(
            "results/plots/scaling_reference.png",
            caption="../report/scaling_reference.rst",
            category="Scaling",
            labels={"figure": "reference measurement"},
        ),
        svg="results/plots/scaling_reference.svg",
    log:
        "logs/plot_scaling_reference.log",
    conda:
        "../../envs/analysis.yaml"
    threads: 1
    resources:
        mem_mb=2000,
        runtime=10,
    script:
        "../../scripts/plot_scaling.py"


rule plot_distance_bins:
    input:
        table="results/distance_bins.tsv",
    output:
        png=report(
            "results/plots/distance_bins.png",
            caption="../report/distance_bins.rst",
            category="Within distance",
            labels={"figure": "metrics by distance"},
        ),
        svg="results/plots/distance_bins.svg",
    log:
        "logs/plot_distance_bins.log",
    conda:
        "../../envs/analysis.yaml"
    threads: 1
    resources:
        mem_mb=2000,
        runtime=10,
    script:
        "../../scripts/plot_distance_bins.py"
