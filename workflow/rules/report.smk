# What only the report needs: the result tables as HTML pages (src/epiformer/evaluation/html_table.py).
# A report shows a TSV as raw text and an HTML page as it is; the TSVs stay the results.


# Every page below, for `rule all`.
REPORT_TABLES = [
    "results/summary.html",
    "results/paired_comparison.html",
    "results/distance_bins.html",
    "results/selection.html",
    *expand("results/transfer/{model}.html", model=TRANSFER_MODELS),
    *expand("results/{cell}/split_audit.html", cell=CELL_LINES),
]


rule summary_html:
    input:
        table="results/summary.tsv",
    output:
        html=report(
            "results/summary.html",
            caption="../report/summary.rst",
            category="Summary",
            labels={"table": "summary"},
        ),
    log:
        "logs/summary_html.log",
    conda:
        "../../envs/analysis.yaml"
    threads: 1
    resources:
        mem_mb=1000,
        runtime=5,
    params:
        title="Test-set results of every cell line, model and baseline",
        view="summary",  # the headline columns, rounded; every column stays in summary.tsv
    script:
        "../../scripts/table_html.py"


use rule summary_html as paired_comparison_html with:
    input:
        table="results/paired_comparison.tsv",
    output:
        html=report(
            "results/paired_comparison.html",
            caption="../report/paired_comparison.rst",
            category="Summary",
            labels={"table": "model minus baseline (paired)"},
        ),
    log:
        "logs/paired_comparison_html.log",
    params:
        title="Each model minus each baseline on the same test pairs (paired bootstrap 95% intervals)",
        view="all",


use rule summary_html as distance_bins_html with:
    input:
        table="results/distance_bins.tsv",
    output:
        html=report(
            "results/distance_bins.html",
            caption="../report/distance_bins_table.rst",
            category="Within distance",
            labels={"table": "metrics by distance bin"},
        ),
    log:
        "logs/distance_bins_html.log",
    params:
        title="AUROC and AUPRC within distance bins of the test pairs",
        view="all",


use rule summary_html as selection_html with:
    input:
        table="results/selection.tsv",
    output:
        html=report(
            "results/selection.html",
            caption="../report/selection.rst",
            category="Summary",
            labels={"table": "the model chosen on validation"},
        ),
    log:
        "logs/selection_html.log",
    params:
        title="Every model's validation AUROC and AUPRC, and the M7 the run puts forward",
        view="all",


use rule summary_html as transfer_html with:
    input:
        table="results/transfer/{model}.tsv",
    output:
        html=report(
            "results/transfer/{model}.html",
            caption="../report/transfer_table.rst",
            category="Transfer across cell lines",
            labels={"model": "{model}", "table": "train x test"},
        ),
    log:
        "logs/transfer/{model}_html.log",
    params:
        title=lambda wildcards: f"Model {wildcards.model} trained on each cell line, tested on each",
        view="all",


use rule summary_html as split_audit_html with:
    input:
        table="results/{cell}/split_audit.tsv",
    output:
        html=report(
            "results/{cell}/split_audit.html",
            caption="../report/split_audit.rst",
            category="Data",
            labels={"cell line": "{cell}", "table": "split audit"},
        ),
    log:
        "logs/{cell}/split_audit_html.log",
    params:
        title=lambda wildcards: f"Windows shared across splits, cell line {wildcards.cell}",
        view="all",
