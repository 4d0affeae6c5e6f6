# epiformer: enhancer-promoter interaction prediction with a linear-attention Transformer.
# This file is the table of contents; each stage lives in workflow/rules/, its logic in
# src/epiformer/.

from snakemake.utils import min_version

min_version("9.19")  # profiles/*/profile.yaml


configfile: "config/config.yaml"


report: "workflow/report/workflow.rst"  # the landing page of snakemake --report


include: "workflow/rules/common.smk"
include: "workflow/rules/demo.smk"
include: "workflow/rules/real_data.smk"
include: "workflow/rules/windows.smk"
include: "workflow/rules/encode.smk"
include: "workflow/rules/train.smk"
include: "workflow/rules/evaluate.smk"
include: "workflow/rules/baselines.smk"
include: "workflow/rules/tracks.smk"
include: "workflow/rules/explain.smk"
include: "workflow/rules/transfer.smk"
include: "workflow/rules/variants.smk"
include: "workflow/rules/summary.smk"
include: "workflow/rules/plots.smk"
include: "workflow/rules/report.smk"
include: "workflow/rules/scaling.smk"


rule all:
    default_target: True
    input:
        all_outputs(),
