# epiformer's workflow lives in workflow/Snakefile (the layout of the Snakemake workflow catalog);
# this file lets `snakemake` run from the repository's top, or as `-s /path/to/epiformer/Snakefile`.


include: "workflow/Snakefile"


# Snakemake restores the including file's default target after an include: name it again.
workflow.default_target = "all"
