# The real-data genome: TargetFinder's real hg19 contigs (data/targetfinder/README.md) placed on
# N-filled chromosomes of true length, bgzip-compressed, with the .fai and .gzi htslib reads.
# The rule writes the .fai itself, so when `genomes:` names this file, index_genome (which
# matches any `{genome}.fai`) must not be chosen for it.


ruleorder: targetfinder_genome > index_genome


rule targetfinder_genome:
    input:
        fragments="data/targetfinder/hg19_fragments.fa.gz",
        sizes="data/targetfinder/hg19.chrom.sizes",
    output:
        fasta="resources/targetfinder/hg19.fa.gz",
        fai="resources/targetfinder/hg19.fa.gz.fai",
        gzi="resources/targetfinder/hg19.fa.gz.gzi",
    log:
        "logs/targetfinder/genome.log",
    conda:
        "../../envs/genome.yaml"
    threads: 1
    resources:
        mem_mb=1000,
        runtime=15,
    script:
        "../../scripts/fragment_genome.py"
