"""What a result was made from: package versions and checksums of the inputs."""

from __future__ import annotations

import platform
from importlib import metadata
from pathlib import Path

from epiformer.io.files import sha256_file

PACKAGES = ("epiformer", "torch", "numpy", "pandas", "scikit-learn", "pyfaidx", "pysam", "pybedtools", "safetensors")


def package_versions() -> dict[str, str]:
    """Installed versions of the packages results depend on (and Python's)."""
    versions = {"python": platform.python_version()}
    for name in PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = "not installed"
    return versions


def input_record(pairs_path: str | Path, genome_path: str | Path) -> dict:
    """Paths and SHA-256 of the pair table and of the genome's index (.fai: names and lengths)."""
    fai = Path(f"{genome_path}.fai")
    return {
        "pairs": str(pairs_path),
        "pairs_sha256": sha256_file(pairs_path),
        "genome": str(genome_path),
        "genome_index_sha256": sha256_file(fai) if fai.exists() else None,
    }
