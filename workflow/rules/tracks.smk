# Genome browser tracks of each model's and baseline's test-split predictions: BEDPE (IGV) and
# UCSC interact (custom track upload), at the sample sheet pairs file's coordinates
# (src/epiformer/scoring/tracks.py). A pooled model's predictions are per cell line, so its tracks are too.


rule tracks:
    input:
        pairs=get_pairs,
        predictions="results/{cell}/{evaluated}/predictions.tsv",
    output:
        bedpe="results/{cell}/{evaluated}/predictions.bedpe",
        interact="results/{cell}/{evaluated}/predictions.interact.bed",
    log:
        "logs/{cell}/{evaluated}/tracks.log",
    wildcard_constraints:
        evaluated=regex_of(EVALUATED),
    conda:
        "../../envs/analysis.yaml"
    threads: 1
    resources:
        mem_mb=2000,
        runtime=10,
    params:
        track_name=lambda wildcards: f"{wildcards.cell} {wildcards.evaluated}",
    script:
        "../../scripts/tracks.py"
