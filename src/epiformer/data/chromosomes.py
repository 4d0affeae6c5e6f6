"""Chromosome names and sizes, and whether pairs fit a genome's chromosomes (no sequence read here).

Sizes come from a UCSC chrom.sizes file or a FASTA index (`.fai`); both start each line with
`name<TAB>length`. The checks name the pairs file's line and say what to do: pairs called on
another build, or a naming scheme that differs only by the `chr` prefix.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from epiformer.constants import ELEMENTS
from epiformer.data.pairs import fail_at_first_bad_row


class GenomeError(ValueError):
    """A genome that cannot be read, or that does not match the pairs."""


def fai_path(fasta: str | Path) -> Path:
    """The FASTA index beside a genome FASTA: `{fasta}.fai`, whose first two columns are name and length."""
    return Path(f"{fasta}.fai")


def flip_chr(name: str) -> str:
    """`chr1` -> `1` and `1` -> `chr1`: the UCSC and Ensembl names of one chromosome."""
    return name[3:] if name.startswith("chr") else f"chr{name}"


def read_chrom_sizes(path: str | Path) -> dict[str, int]:
    """`name -> length` from a UCSC chrom.sizes file or a FASTA index (.fai), in file order.

    Both start each line with `name<TAB>length`; blank and `#` lines are skipped.
    """
    sizes: dict[str, int] = {}
    for number, line in enumerate(Path(path).read_text().splitlines(), start=1):
        if not line.strip() or line.startswith("#"):
            continue
        fields = line.split("\t")
        if len(fields) < 2 or not fields[1].strip().isdigit() or int(fields[1]) == 0:
            raise GenomeError(f"{path}, line {number}: {line!r} is not `name<TAB>length` with a positive length.")
        if fields[0] in sizes:
            raise GenomeError(f"{path}, line {number}: chromosome {fields[0]!r} is listed twice.")
        sizes[fields[0]] = int(fields[1])
    if not sizes:
        raise GenomeError(f"{path} lists no chromosomes; expected `name<TAB>length` lines (UCSC chrom.sizes).")
    return sizes


def check_pairs_fit_genome(pairs: pd.DataFrame, sizes: dict[str, int], genome_name: str) -> None:
    """Fail on the first pair whose chromosome the genome lacks or whose element ends past its chromosome's end."""
    check_chromosomes(pairs, sizes, genome_name)
    check_within_chromosomes(pairs, sizes, genome_name)


def check_chromosomes(pairs: pd.DataFrame, sizes: dict[str, int], genome_name: str = "the genome") -> None:
    """Fail on chromosomes the genome lacks: a hint about the build when none match, about `chr` when one differs."""
    used = pd.unique(pairs[["enhancer_chrom", "promoter_chrom"]].to_numpy().ravel())
    known = [c for c in used if c in sizes or flip_chr(c) in sizes]
    some = ", ".join(list(sizes)[:5]) + (", ..." if len(sizes) > 5 else "")
    if not known:
        raise GenomeError(
            f"None of the chromosomes in {pairs.attrs.get('path', 'the pairs')} ({', '.join(map(str, used[:5]))}"
            f"{', ...' if len(used) > 5 else ''}) is in {genome_name} (it has {some}). The pairs and the genome "
            "come from different builds or naming schemes (UCSC 'chr1' against Ensembl '1'): use the genome "
            "the pairs were called on, or rename one side."
        )

    def unknown_chromosome(column: str):
        def problem(row: int) -> str:
            name = pairs[column].iloc[row]
            flipped = flip_chr(name)
            hint = (
                f" The genome names it {flipped!r}: only the `chr` prefix differs; rename one side to match."
                if flipped in sizes
                else " Use a genome of the same build, or remove the pairs on that sequence."
            )
            return f"{column} {name!r} is not in {genome_name} (it has {some}).{hint}"

        return problem

    for column in (f"{element}_chrom" for element in ELEMENTS):
        fail_at_first_bad_row(pairs, ~pairs[column].isin(list(sizes)), unknown_chromosome(column))


def check_within_chromosomes(pairs: pd.DataFrame, sizes: dict[str, int], genome_name: str) -> None:
    """Fail when an element ends past the end of its chromosome: the pairs come from another build."""
    for element in ELEMENTS:
        lengths = pairs[f"{element}_chrom"].map(sizes).to_numpy()
        fail_at_first_bad_row(
            pairs,
            pairs[f"{element}_end"].to_numpy() > lengths,
            lambda row, element=element, lengths=lengths: (
                f"{element}_end {int(pairs[f'{element}_end'].iloc[row])} is past the end of "
                f"{pairs[f'{element}_chrom'].iloc[row]} ({int(lengths[row]):,} bp) in {genome_name}. "
                "The pairs were called on another build of the genome: give that build's FASTA."
            ),
            error=GenomeError,
        )
