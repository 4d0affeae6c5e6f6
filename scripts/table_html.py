"""A result table as an HTML page for the report (the TSV stays the result)."""

from epiformer.evaluation.html_table import write_table_html
from epiformer.io.runlog import setup_logging

setup_logging(snakemake.log[0])
write_table_html(
    snakemake.input.table, snakemake.output.html, snakemake.params.title, snakemake.params.get("view", "all")
)
