import gzip

import pandas as pd
import pytest

from epiformer.data.pairs import PAIR_COLUMNS, PairsError, read_pairs

CSV = """enhancer_chrom,enhancer_start,enhancer_end,promoter_chrom,promoter_start,promoter_end,label,extra
chr1,100,300,chr1,5000,5200,1,x
chr1,900,1100,chr1,3000,3300,0,y
"""
BEDPE = """#chrom1\tstart1\tend1\tchrom2\tstart2\tend2\tname\tscore\tstrand1\tstrand2\tlabel
chr1\t100\t300\tchr1\t5000\t5200\tp0\t.\t.\t.\t1
chr1\t900\t1100\tchr1\t3000\t3300\tp1\t.\t.\t.\t0
"""
# ENCODE-rE2G's CRISPR benchmark: the element is the enhancer, the TSS the promoter, Regulated the label; the
# chromatin columns (H3K27ac.RPM here) ride along unread. Row 4 is how the benchmark writes a gene it has no TSS for.
CRISPR = """\
chrom chromStart chromEnd name chrTSS startTSS endTSS measuredGeneSymbol Regulated distanceToTSS CellType H3K27ac.RPM
chr1 100 300 A|chr1:90-290:* chr1 5100 5101 GENEA TRUE 4900 K562 2.5
chr1 900 1100 B|chr1:890-1090:* chr1 3150 3151 GENEB FALSE 2150 K562 0.1
chr1 900 1100 C|chr1:890-1090:* chr1 3150 3151 GENEC false 2150 K562 0.1
chr1 900 1100 D|chr1:890-1090:* chr1 0 0 GENED FALSE 9000 K562 0.1
""".replace(" ", "\t")


def write(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text)
    return path


def test_targetfinder_and_bedpe_give_the_same_pairs(tmp_path):
    csv = read_pairs(write(tmp_path, "p.csv", CSV))
    bedpe = read_pairs(write(tmp_path, "p.bedpe", BEDPE))
    assert csv.attrs["format"] == "targetfinder" and bedpe.attrs["format"] == "bedpe"
    pd.testing.assert_frame_equal(csv[PAIR_COLUMNS], bedpe[PAIR_COLUMNS])
    assert list(csv["pair_id"]) == [0, 1]
    assert list(csv["extra"]) == ["x", "y"]  # extra columns are carried through
    assert csv["enhancer_start"].dtype == "int64"


def test_bedpe_without_header_and_gzipped(tmp_path):
    path = tmp_path / "p.bedpe.gz"
    with gzip.open(path, "wt") as handle:
        handle.write(BEDPE.split("\n", 1)[1])
    pairs = read_pairs(path)
    assert len(pairs) == 2 and pairs["label"].tolist() == [1, 0]


@pytest.mark.parametrize(
    "table, old, new, message",
    [
        (CSV, "chr1,900,1100", "chr1,9x0,1100", r"line 3: enhancer_start is '9x0'"),
        (CSV, "chr1,900,1100", "chr1,-5,1100", r"line 3: enhancer_start is '-5'"),
        (CSV, "chr1,5000,5200,1", "chr1,5200,5200,1", r"line 2: promoter_start is 5200; it must be below promoter_end"),
        (CSV, "3300,0,y", "3300,2,y", r"line 3: label is '2'; it must be 0 or 1"),
        (CSV, "enhancer_chrom,", "chrom,", r"line 1: missing column\(s\) enhancer_chrom"),
        (CRISPR, "GENEB\tFALSE", "GENEB\tNA", r"line 3: Regulated is 'NA'; it must be TRUE or FALSE"),
        (CRISPR, "GENEC\tfalse", "GENEC\t", r"line 4: Regulated is ''; it must be TRUE or FALSE"),
        (CRISPR, "\tchrTSS\t", "\tchrGene\t", r"line 1: missing column\(s\) chrTSS\. ENCODE-rE2G's CRISPR benchmark"),
        (CRISPR, "\tchromStart\t", "\tstart\t", r"line 1: missing column\(s\) chromStart\. ENCODE-rE2G's CRISPR"),
        (CRISPR, "\tRegulated\t", "\tSignificant\t", r"line 1: no `Regulated` column, the label"),
        (CRISPR, "\tCellType\t", "\tlabel\t", r"line 1: a `label` column beside the benchmark's columns"),
    ],
)
def test_bad_values_name_file_line_value_and_fix(tmp_path, table, old, new, message):
    path = write(tmp_path, "bad.csv" if table is CSV else "bad.tsv", table.replace(old, new, 1))
    with pytest.raises(PairsError, match=message) as error:
        read_pairs(path)
    assert str(path) in str(error.value)


def test_empty_table_is_rejected(tmp_path):
    with pytest.raises(PairsError, match="no pairs"):
        read_pairs(write(tmp_path, "empty.csv", CSV.splitlines()[0] + "\n"))
    with pytest.raises(PairsError, match="empty"):
        read_pairs(write(tmp_path, "blank.bedpe", "\n"))


def test_crispr_benchmark_reads_the_element_as_enhancer_the_tss_as_promoter_and_regulated_as_label(tmp_path):
    path = tmp_path / "benchmark.tsv.gz"
    with gzip.open(path, "wt") as handle:
        handle.write(CRISPR)
    pairs = read_pairs(path)
    assert pairs.attrs["format"] == "crispr_benchmark"
    expected = pd.DataFrame(
        {
            "pair_id": [0, 1, 2],
            "enhancer_chrom": "chr1",
            "enhancer_start": [100, 900, 900],
            "enhancer_end": [300, 1100, 1100],
            "promoter_chrom": "chr1",
            "promoter_start": [5100, 3150, 3150],
            "promoter_end": [5101, 3151, 3151],
            "label": [1, 0, 0],  # TRUE, FALSE, and FALSE in any case
        }
    )
    pd.testing.assert_frame_equal(pairs[PAIR_COLUMNS], expected)
    assert pairs["measuredGeneSymbol"].tolist() == ["GENEA", "GENEB", "GENEC"]  # extras carried through
    assert {"distanceToTSS", "CellType", "name", "H3K27ac.RPM"} <= set(pairs.columns)
    assert "Regulated" not in pairs.columns  # it is the label
    assert pairs.attrs["dropped_on_read"] == {"tss_missing": [3], "element_empty": []}  # pair ids = file data rows


def test_crispr_benchmark_labels_are_optional_for_scoring(tmp_path):
    no_label = CRISPR.replace("\tRegulated\t", "\tSignificant\t")
    unlabelled = read_pairs(write(tmp_path, "unlabelled.tsv", no_label), require_label=False)
    assert unlabelled["label"].tolist() == [-1, -1, -1]
    odd = read_pairs(write(tmp_path, "odd.tsv", CRISPR.replace("GENEB\tFALSE", "GENEB\tNA")), require_label=False)
    assert odd["label"].tolist() == [1, -1, 0]  # anything but TRUE/FALSE is unknown


def test_crispr_benchmark_with_no_interval_to_centre_on_is_rejected(tmp_path):
    only_missing = CRISPR.splitlines()[0] + "\n" + CRISPR.splitlines()[4] + "\n"
    with pytest.raises(PairsError, match="every row has an empty TSS or element interval"):
        read_pairs(write(tmp_path, "missing.tsv", only_missing))
