"""The contig-placing genome builder, checked against htslib (pysam), gzip and `bedtools getfasta`."""

from __future__ import annotations

import gzip
import shutil
from pathlib import Path

import numpy as np
import pysam
import pytest
import yaml

from epiformer.data.genome import Genome, GenomeError, fai_path, gzi_path
from epiformer.synthetic.fragment_genome import BLOCK_BASES, build_fragment_genome
from tests.helpers import REPO, bedtools_getfasta, require_bedtools, snakemake

TARGETFINDER = REPO / "data" / "targetfinder"

# Lengths that exercise the block layout: two full blocks and a tail; exactly two full blocks;
# a chromosome shorter than one line; a chromosome with no contig at all.
SIZES = {"chr1": 150_000, "chr2": 2 * BLOCK_BASES, "chr3": 61, "chr4": 1000}


def random_bases(rng: np.random.Generator, n: int) -> str:
    return "".join(rng.choice(list("ACGT"), n))


def synthetic_contigs() -> list[tuple[str, int, str]]:
    """(chrom, 0-based start, bases): at a chromosome start and end, across a block boundary,
    touching, overlapping (agreeing, in another case), at the end of a full block, a whole chromosome."""
    rng = np.random.default_rng(5)
    shared = random_bases(rng, 51)
    return [
        ("chr1", 0, random_bases(rng, 100)),
        ("chr1", BLOCK_BASES - 51, random_bases(rng, 151)),
        ("chr1", BLOCK_BASES + 100, random_bases(rng, 50)),
        ("chr1", 69_999, random_bases(rng, 50) + shared),
        ("chr1", 70_049, shared.lower() + random_bases(rng, 100)),
        ("chr1", 149_950, random_bases(rng, 50)),
        ("chr2", 2 * BLOCK_BASES - 60, random_bases(rng, 60)),
        ("chr3", 0, random_bases(rng, 61)),
    ]


def expected_chromosomes(contigs) -> dict[str, str]:
    genome = {chrom: bytearray(b"N" * length) for chrom, length in SIZES.items()}
    for chrom, start, bases in reversed(contigs):  # where contigs overlap, the one that starts first is kept
        genome[chrom][start : start + len(bases)] = bases.encode()
    return {chrom: seq.decode() for chrom, seq in genome.items()}


def write_inputs(folder: Path, contigs, compress: bool = True) -> tuple[Path, Path]:
    records = "".join(
        f">{chrom}:{start + 1}-{start + len(bases)}\n"
        + "".join(bases[i : i + 60] + "\n" for i in range(0, len(bases), 60))
        for chrom, start, bases in contigs
    )
    fragments = folder / ("fragments.fa.gz" if compress else "fragments.fa")
    fragments.write_bytes(gzip.compress(records.encode()) if compress else records.encode())
    sizes = folder / "chrom.sizes"
    sizes.write_text("".join(f"{chrom}\t{length}\n" for chrom, length in SIZES.items()))
    return fragments, sizes


def fasta_of(chromosomes: dict[str, str]) -> bytes:
    return "".join(
        f">{chrom}\n" + "".join(seq[i : i + 60] + "\n" for i in range(0, len(seq), 60))
        for chrom, seq in chromosomes.items()
    ).encode()


@pytest.fixture
def built(tmp_path):
    contigs = synthetic_contigs()
    fragments, sizes = write_inputs(tmp_path, contigs)
    output = tmp_path / "out" / "genome.fa.gz"
    build = build_fragment_genome(fragments, sizes, output)
    return output, contigs, build


def test_genome_is_the_contigs_on_n_at_true_lengths(built):
    output, contigs, build = built
    expected = expected_chromosomes(contigs)
    assert gzip.decompress(output.read_bytes()) == fasta_of(expected)  # byte for byte, 60-base lines
    with pysam.FastaFile(str(output)) as fasta:  # htslib reading through our .fai and .gzi
        assert dict(zip(fasta.references, fasta.lengths)) == SIZES
        for chrom, seq in expected.items():
            assert fasta.fetch(chrom) == seq
    assert build.chromosomes == 4 and build.contigs == 8 and build.genome_bases == sum(SIZES.values())
    assert build.known_bases == sum(len(b) for _, _, b in contigs) - 51  # the overlap counts once
    assert build.blocks_compressed < build.blocks  # the all-N full block was reused


def test_indexes_are_identical_to_what_htslib_writes(built, tmp_path):
    output, _, _ = built
    copy = tmp_path / "copy.fa.gz"
    shutil.copy(output, copy)
    pysam.faidx(str(copy))
    assert fai_path(copy).read_bytes() == fai_path(output).read_bytes()
    assert gzi_path(copy).read_bytes() == gzi_path(output).read_bytes()


def test_bedtools_getfasta_on_the_decompressed_genome_returns_every_contig(built, tmp_path):
    require_bedtools()
    output, contigs, _ = built
    plain = tmp_path / "genome.fa"
    plain.write_bytes(gzip.decompress(output.read_bytes()))
    intervals = [(chrom, start, start + len(bases)) for chrom, start, bases in contigs]
    # Case aside: the lowercase overlapping contig takes its overlap from the contig placed first.
    assert bedtools_getfasta(plain, intervals, tmp_path) == [bases.upper() for _, _, bases in contigs]
    with Genome(output) as genome:  # the package reads it without re-indexing
        for chrom, start, bases in contigs:
            assert genome.fetch(chrom, start, start + len(bases)).decode() == bases.upper()


def test_plain_fragments_build_the_same_genome(built, tmp_path):
    output, contigs, _ = built
    fragments, sizes = write_inputs(tmp_path, contigs, compress=False)
    build_fragment_genome(fragments, sizes, tmp_path / "plain.fa.gz")
    assert (tmp_path / "plain.fa.gz").read_bytes() == output.read_bytes()


BAD_FRAGMENTS = {
    "unknown chromosome": (
        ">chr1:1-4\nACGT\n>chrZ:1-4\nACGT\n",
        r"fragments\.fa, line 3: .*'chrZ'.*not in .*chrom\.sizes",
    ),
    "chr prefix": (">3:1-4\nACGT\n", r"line 1: .*'3'.*The sizes name it 'chr3': only the `chr` prefix differs"),
    "past the end": (">chr3:60-63\nACGT\n", r"line 1: .*ends at 63, past the end of chr3 \(61 bp"),
    "malformed header": (">chr1_1_4\nACGT\n", r"line 1: header 'chr1_1_4' is not `>chrom:START-END`"),
    "zero start": (">chr1:0-3\nACGT\n", r"line 1: .*1 <= START <= END"),
    "wrong length": (">chr1:1-4\nACGT\n>chr1:11-15\nACGT\n", r"line 3: .*has 4 bases, but its region spans 5"),
    "sequence first": ("ACGT\n>chr1:1-4\nACGT\n", r"line 1: sequence before the first"),
    "not a base": (">chr1:1-4\nAC-T\n", r"line 2: b'-' in a sequence line"),
    "disagreeing overlap": (
        ">chr1:1-4\nACGT\n>chr2:1-2\nAC\n>chr1:3-6\nCCAA\n",
        r"chr1:1-4 \(line 1\) and chr1:3-6 \(line 5\) overlap but differ at chr1:3 \(G against C\)",
    ),
}


@pytest.mark.parametrize("case", BAD_FRAGMENTS, ids=str)
def test_bad_fragments_are_refused_naming_file_and_line(case, tmp_path):
    text, message = BAD_FRAGMENTS[case]
    _, sizes = write_inputs(tmp_path, [])
    fragments = tmp_path / "fragments.fa"
    fragments.write_text(text)
    with pytest.raises(GenomeError, match=message) as error:
        build_fragment_genome(fragments, sizes, tmp_path / "out" / "genome.fa.gz")
    assert str(fragments) in str(error.value)
    assert not (tmp_path / "out").exists()  # checks run before anything is written


def test_truncated_gzip_fragments_are_refused_naming_the_file(tmp_path):
    _, sizes = write_inputs(tmp_path, [])
    fragments = tmp_path / "cut.fa.gz"
    fragments.write_bytes(gzip.compress(b">chr1:1-4\nACGT\n" * 1000)[:-20])
    with pytest.raises(GenomeError, match=r"cut\.fa\.gz: cannot be decompressed"):
        build_fragment_genome(fragments, sizes, tmp_path / "genome.fa.gz")


@pytest.mark.parametrize(
    "sizes_text, message",
    [
        ("chr1 100\n", r"line 1: 'chr1 100' is not `name<TAB>length`"),
        ("chr1\t100\nchr1\t5\n", r"line 2: .*twice"),
        ("chr1\t0\n", r"line 1: .*positive length"),
        ("# nothing\n", r"lists no chromosomes"),
    ],
)
def test_bad_sizes_are_refused_naming_file_and_line(sizes_text, message, tmp_path):
    fragments = tmp_path / "fragments.fa"
    fragments.write_text(">chr1:1-4\nACGT\n")
    sizes = tmp_path / "bad.sizes"
    sizes.write_text(sizes_text)
    with pytest.raises(GenomeError, match=message) as error:
        build_fragment_genome(fragments, sizes, tmp_path / "genome.fa.gz")
    assert str(sizes) in str(error.value)


def test_rebuilding_replaces_old_indexes(built):
    output, contigs, _ = built
    fai_path(output).write_text("stale\t1\t1\t1\t2\n")
    gzi_path(output).write_bytes(b"\0" * 8)
    fragments, sizes = output.parent.parent / "fragments.fa.gz", output.parent.parent / "chrom.sizes"
    build_fragment_genome(fragments, sizes, output)
    with Genome(output) as genome:
        assert genome.sizes == SIZES


def read_fasta_records(path: Path) -> dict[str, str]:
    records, name = {}, None
    with gzip.open(path, "rt") as handle:
        for line in handle:
            if line.startswith(">"):
                name = line[1:].strip()
                records[name] = ""
            else:
                records[name] += line.strip()
    return records


@pytest.fixture(scope="module")
def real_genome(tmp_path_factory) -> tuple[Path, str]:
    """The real-data genome, built by the workflow's rule in a copy of the workflow; (path, Snakemake's stderr)."""
    fragments, sizes = TARGETFINDER / "hg19_fragments.fa.gz", TARGETFINDER / "hg19.chrom.sizes"
    if not fragments.exists() or not sizes.exists():
        pytest.fail(f"{fragments} or {sizes} is missing: copy data/targetfinder/ into the checkout (see its README.md)")
    work = tmp_path_factory.mktemp("real_data")
    for name in ("Snakefile", "workflow", "scripts", "envs", "config", "docs"):  # rules read docs/ when parsed
        (shutil.copytree if (REPO / name).is_dir() else shutil.copy)(REPO / name, work / name)
    (work / "data").symlink_to(REPO / "data")
    config = yaml.safe_load((work / "config" / "config.yaml").read_text())
    config["genomes"]["hg19"] = "resources/targetfinder/hg19.fa.gz"  # so index_genome matches its .fai too
    (work / "config" / "config.yaml").write_text(yaml.safe_dump(config))
    run = snakemake(work, "resources/targetfinder/hg19.fa.gz.fai", cores=1)
    assert run.returncode == 0, run.stderr[-5000:]
    return work / "resources" / "targetfinder" / "hg19.fa.gz", run.stderr


def test_rule_builds_the_real_genome_with_its_indexes_instead_of_index_genome(real_genome):
    output, stderr = real_genome
    assert "rule targetfinder_genome:" in stderr and "index_genome" not in stderr
    assert fai_path(output).exists() and gzi_path(output).exists()
    again = snakemake(output.parents[2], "-n", str(fai_path(output).relative_to(output.parents[2])), cores=1)
    assert again.returncode == 0 and "Nothing to be done" in again.stdout + again.stderr


def test_real_targetfinder_genome_has_true_lengths_and_its_contigs(real_genome):
    output, _ = real_genome
    fragments, sizes = TARGETFINDER / "hg19_fragments.fa.gz", TARGETFINDER / "hg19.chrom.sizes"
    true_sizes = {line.split("\t")[0]: int(line.split("\t")[1]) for line in sizes.read_text().splitlines()}
    assert output.stat().st_size < 30_000_000  # 3.1 Gb of mostly N in a few tens of MB
    records = read_fasta_records(fragments)
    names = list(records)
    assert len(names) == 23_291
    chosen = {
        names[0],
        names[-1],
        max(names, key=lambda n: len(records[n])),
        min(names, key=lambda n: len(records[n])),
        next(n for n in names if n.startswith("chrX:")),
        names[len(names) // 2],
    }
    with Genome(output) as genome:
        assert list(genome.sizes.items()) == list(true_sizes.items())
        for name in chosen:
            chrom, span = name.rsplit(":", 1)
            start, end = (int(x) for x in span.split("-"))
            assert genome.fetch(chrom, start - 1, end).decode() == records[name], name
            # The contigs neither touch nor overlap, so the bases either side are N.
            assert genome.fetch(chrom, start - 2, start - 1) == genome.fetch(chrom, end, end + 1) == b"N", name
