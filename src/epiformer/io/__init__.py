"""File formats and files between jobs: atomic writes, checksums, BGZF, bigWig, VCF, job logs, provenance."""
