rule plot_roc_pr:
    input:
        predictions=expand("results/{{cell}}/{model}/predictions.tsv", model=MODELS),
        metrics=expand("results/{{cell}}/{model}/metrics.json", model=MODELS),
    output:
        report(
            "results/plots/{cell}/roc_pr.png",
            caption="../report/roc_pr.rst",
            category="Test-set curves",
            labels={"cell line": "{cell}"},
        ),
    params:
        models=MODELS,
    log:
        "logs/{cell}/plot_roc_pr.log",
    conda:
        "../../envs/evaluate.yaml"
    script:
        "../../scripts/plot_roc_pr.py"


rule plot_training:
    input:
        log_table="results/{cell}/{model}/train_log.tsv",
        description="results/{cell}/{model}/model.json",
    output:
        report(
            "results/plots/{cell}/{model}.training.png",
            caption="../report/training.rst",
            category="Training curves",
            labels={"cell line": "{cell}", "model": "{model}"},
        ),
    log:
        "logs/{cell}/{model}/plot_training.log",
    conda:
        "../../envs/evaluate.yaml"
    script:
        "../../scripts/plot_training.py"


rule summary:
    input:
        metrics=expand("results/{cell}/{model}/metrics.json", cell=CELL_LINES, model=MODELS),
        descriptions=expand("results/{cell}/{model}/model.json", cell=CELL_LINES, model=MODELS),
        predictions=expand("results/{cell}/{model}/predictions.tsv", cell=CELL_LINES, model=MODELS),
        truths=[get_truth(cell) for cell in CELL_LINES if get_truth(cell)],
    output:
        tsv=report("results/summary.tsv", caption="../report/summary.rst", category="Summary"),
        markdown="results/summary.md",
    params:
        results=[
            {"cell_line": cell, "model": model, "truth": get_truth(cell)}
            for cell in CELL_LINES
            for model in MODELS
        ],
    log:
        "logs/summary.log",
    conda:
        "../../envs/evaluate.yaml"
    script:
        "../../scripts/summary.py"
