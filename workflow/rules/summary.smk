# One table of every (cell line, model or baseline) result, and the paired model-minus-baseline
# differences (src/epiformer/evaluation/summary.py).


rule summary:
    input:
        metrics=expand("results/{cell}/{model}/metrics.json", cell=CELL_LINES, model=EVALUATED),
        predictions=expand("results/{cell}/{model}/predictions.tsv", cell=CELL_LINES, model=EVALUATED),
        descriptions=[f"{model_dir(cell, model)}/model.json" for cell in CELL_LINES for model in MODELS],
        truths=[get_truth(cell) for cell in CELL_LINES if get_truth(cell)],
        windows_stats=expand("results/{cell}/windows_stats.json", cell=CELL_LINES),
        windows=expand("results/{cell}/windows.tsv", cell=CELL_LINES),
        selection="results/selection.tsv",
    output:
        tsv="results/summary.tsv",
        markdown="results/summary.md",
        paired="results/paired_comparison.tsv",
        distance_bins="results/distance_bins.tsv",
    log:
        "logs/summary.log",
    conda:
        "../../envs/analysis.yaml"
    threads: 1
    resources:
        mem_mb=2000,
        runtime=10,
    params:
        results=[
            {
                "cell_line": cell,
                "model": model,
                "truth": get_truth(cell),
                "windows_stats": f"results/{cell}/windows_stats.json",
                "windows": f"results/{cell}/windows.tsv",
                "description": f"{model_dir(cell, model)}/model.json" if model in MODELS else "",
            }
            for cell in CELL_LINES
            for model in EVALUATED
        ],
        bootstrap=config["evaluate"]["bootstrap"],
        bootstrap_unit=config["evaluate"]["bootstrap_unit"],
        seed=config["evaluate"]["seed"],
        distance_bins=config["evaluate"]["distance_bins"],
        distance_strata=config["evaluate"]["distance_strata"],
    script:
        "../../scripts/summary.py"
