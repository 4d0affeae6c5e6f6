"""A real contiguous genome: 1 Mb of GRCh37 chromosome 22, as Debian's hisat2 package ships it.

`/usr/share/doc/hisat2/examples/reference/22_20-21M.fa` holds 22:20,000,001-21,000,000 with
the header `>22:20000001-21000000`, which is exactly the builder's `chrom:START-END` contig
header, so it is placed at its coordinates on an N-filled chromosome `22` of hg19's length.
Windows extracted there by the package are checked against `bedtools getfasta`, and the
real-data TargetFinder fragments that fall in the region against the hisat2 sequence.
"""

from __future__ import annotations

import gzip
from pathlib import Path

import numpy as np
import pytest

from epiformer.data.encode import encode_element
from epiformer.data.genome import Genome
from epiformer.data.pairs import PairsError, read_pairs
from epiformer.data.windows import WindowSpec, make_windows
from epiformer.sequence.onehot import one_hot, pack_one_hot
from epiformer.synthetic.fragment_genome import build_fragment_genome
from tests.helpers import REPO, bedtools_getfasta, require_bedtools

HISAT2_REFERENCE = Path("/usr/share/doc/hisat2/examples/reference/22_20-21M.fa")
INSTALL = "sudo apt-get install -y hisat2"
CHR22_LENGTH = 51_304_566  # hg19 (GRCh37) chr22
REGION = (20_000_000, 21_000_000)  # 0-based, half-open
FRAGMENTS = REPO / "data" / "targetfinder" / "hg19_fragments.fa.gz"
HEADER = "enhancer_chrom,enhancer_start,enhancer_end,promoter_chrom,promoter_start,promoter_end,label\n"


@pytest.fixture(scope="module")
def chr22(tmp_path_factory):
    """(bgzip genome, the same genome plain, the hisat2 sequence of REGION)."""
    if not HISAT2_REFERENCE.exists():
        pytest.fail(
            f"{HISAT2_REFERENCE} is missing; Debian's hisat2 package ships it: `{INSTALL}` "
            "(make test runs it when run as root)"
        )
    folder = tmp_path_factory.mktemp("chr22")
    sizes = folder / "chr22.sizes"
    sizes.write_text(f"22\t{CHR22_LENGTH}\n")
    genome = folder / "22.fa.gz"
    build_fragment_genome(HISAT2_REFERENCE, sizes, genome)
    plain = folder / "22.fa"
    plain.write_bytes(gzip.decompress(genome.read_bytes()))
    lines = HISAT2_REFERENCE.read_text().splitlines()
    assert lines[0] == ">22:20000001-21000000"
    region = "".join(lines[1:])
    assert len(region) == REGION[1] - REGION[0]
    return genome, plain, region


def write_pairs(path: Path, chrom: str, rng: np.random.Generator) -> Path:
    """150 pairs in the region, 10 straddling its ends, 5 far out in the N (whose windows are all N)."""
    inside = rng.integers(REGION[0] + 3000, REGION[1] - 3000, 150)
    edges = np.concatenate([REGION[0] + rng.integers(-1000, 1000, 5), REGION[1] + rng.integers(-1000, 1000, 5)])
    far = rng.integers(1_000_000, 10_000_000, 5)
    enhancers = np.concatenate([inside, edges, far])
    promoters = np.clip(enhancers + rng.integers(-100_000, 100_000, len(enhancers)), REGION[0], REGION[1] - 500)
    promoters[-5:] = enhancers[-5:] + 50_000
    rows = [
        f"{chrom},{e},{e + 400},{chrom},{p},{p + 300},{i % 2}\n" for i, (e, p) in enumerate(zip(enhancers, promoters))
    ]
    path.write_text(HEADER + "".join(rows))
    return path


def test_windows_on_chromosome_22_equal_bedtools_getfasta(chr22, tmp_path):
    require_bedtools()
    genome_path, plain, _ = chr22
    pairs = read_pairs(write_pairs(tmp_path / "pairs.csv", "22", np.random.default_rng(22)))
    flank = 8
    with Genome(genome_path) as genome, Genome(plain) as plain_genome:
        assert genome.sizes == plain_genome.sizes == {"22": CHR22_LENGTH}
        windows, report = make_windows(pairs, genome.sizes, WindowSpec(3000, 2000), genome)
        # The far pairs and those in the region's real 100-kb assembly gap (20,509,431-20,609,431) go.
        assert report.dropped["enhancer_window_mostly_n"] >= 5 and len(windows) >= 100
        assert len(windows) + sum(report.dropped.values()) == len(pairs)
        for element in ("enhancer", "promoter"):
            chroms, starts, ends = (windows[f"{element}_{part}"] for part in ("chrom", "start", "end"))
            expected = bedtools_getfasta(plain, zip(chroms, starts, ends), tmp_path)
            codes = genome.fetch_many(chroms.tolist(), starts, ends)
            assert [row.tobytes().decode() for row in codes] == expected
            assert any("N" in seq for seq in expected)  # windows reaching into N are kept when at most half N
            assert all(seq.count("N") <= len(seq) / 2 for seq in expected)
            np.testing.assert_array_equal(plain_genome.fetch_many(chroms.tolist(), starts, ends), codes)
            # What the encode stage stores: the packed one-hot of each window and its flanks.
            flanked = bedtools_getfasta(plain, zip(chroms, starts - flank, ends + flank), tmp_path)
            stored = pack_one_hot(one_hot([seq.encode() for seq in flanked]))
            np.testing.assert_array_equal(encode_element(genome, chroms, starts, ends, flank), stored)


def test_pairs_named_chr22_get_the_chr_prefix_hint(chr22, tmp_path):
    genome_path, _, _ = chr22
    pairs = read_pairs(write_pairs(tmp_path / "ucsc_pairs.csv", "chr22", np.random.default_rng(1)))
    with Genome(genome_path) as genome:
        with pytest.raises(
            PairsError,
            match=r"ucsc_pairs\.csv, line 2: enhancer_chrom 'chr22' is not in genome .*"
            r"The genome names it '22': only the `chr` prefix differs",
        ):
            make_windows(pairs, genome.sizes, WindowSpec(3000, 2000), genome)


def test_real_data_fragments_in_the_region_equal_the_hisat2_sequence(chr22):
    genome_path, _, region = chr22
    if not FRAGMENTS.exists():
        pytest.fail(f"{FRAGMENTS} is missing: copy data/targetfinder/ into the checkout (see its README.md)")
    found = {}  # (0-based start, end, header) -> bases, of the chr22 contigs inside REGION
    with gzip.open(FRAGMENTS, "rt") as handle:
        name = None
        for line in handle:
            if line.startswith(">"):
                name = line[1:].strip()
                chrom, span = name.rsplit(":", 1)
                start, end = (int(x) for x in span.split("-"))
                name = (
                    (start - 1, end, name) if chrom == "chr22" and start - 1 >= REGION[0] and end <= REGION[1] else None
                )
                if name:
                    found[name] = ""
            elif name:
                found[name] += line.strip()
    assert len(found) == 14
    with Genome(genome_path) as genome:
        for (start, end, name), bases in found.items():
            assert bases == region[start - REGION[0] : end - REGION[0]], name
            assert genome.fetch("22", start, end).decode() == bases, name
