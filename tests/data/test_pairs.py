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
    "old, new, message",
    [
        ("chr1,900,1100", "chr1,9x0,1100", r"line 3: enhancer_start is '9x0'"),
        ("chr1,900,1100", "chr1,-5,1100", r"line 3: enhancer_start is '-5'"),
        ("chr1,5000,5200,1", "chr1,5200,5200,1", r"line 2: promoter_start is 5200; it must be below promoter_end"),
        ("3300,0,y", "3300,2,y", r"line 3: label is '2'; it must be 0 or 1"),
        ("enhancer_chrom,", "chrom,", r"line 1: missing column\(s\) enhancer_chrom"),
    ],
)
def test_bad_values_name_file_line_value_and_fix(tmp_path, old, new, message):
    path = write(tmp_path, "bad.csv", CSV.replace(old, new, 1))
    with pytest.raises(PairsError, match=message) as error:
        read_pairs(path)
    assert str(path) in str(error.value)


def test_empty_table_is_rejected(tmp_path):
    with pytest.raises(PairsError, match="no pairs"):
        read_pairs(write(tmp_path, "empty.csv", CSV.splitlines()[0] + "\n"))
    with pytest.raises(PairsError, match="empty"):
        read_pairs(write(tmp_path, "blank.bedpe", "\n"))
