"""epiformer.io.configfile: the config's values checked before the schema and the jobs see them."""

import pandas as pd
import pytest

from epiformer.io.configfile import RESERVED_CELL_NAMES, check_folder_names, check_numbers, check_sample_sheet


def test_a_number_yaml_reads_as_text_is_named_with_how_to_write_it():
    with pytest.raises(ValueError, match=r"config: train\.learning_rate is '3e-4'.*Write 0\.0003 instead"):
        check_numbers({"train": {"learning_rate": "3e-4", "epochs": 2}})
    check_numbers({"train": {"learning_rate": 3.0e-4}})


@pytest.mark.parametrize("name, fix", [("K 562", "'K_562'"), ("cells/a", "'cells_a'"), ("-x", "'x'"), ("", "'name'")])
def test_a_name_that_cannot_be_a_folder_is_refused_naming_it_and_a_fix(name, fix):
    with pytest.raises(ValueError, match="samples.tsv: cell line") as error:
        check_folder_names(["GM12878", name], "cell line", "samples.tsv")
    assert repr(name) in str(error.value) and fix in str(error.value)


def test_a_cell_line_may_not_take_a_folder_the_run_writes_for_itself():
    check_folder_names(["GM12878", "HeLa-S3", "IMR90.v2", "k562_rep1"], "cell line", "s.tsv", RESERVED_CELL_NAMES)
    with pytest.raises(ValueError, match=r"the cell line name 'pooled' is reserved \(results/pooled/: pooled models\)"):
        check_folder_names(["pooled"], "cell line", "s.tsv", RESERVED_CELL_NAMES)


GENOMES = {"hg19": "data/hg19.fa", "GRCh38": ""}
SHEET = pd.DataFrame({"cell_line": ["GM12878", "K562"], "pairs": ["a.csv", "b.csv"], "genome": ["hg19", "hg19"]})


@pytest.mark.parametrize(
    "rows, message",
    [
        (SHEET.iloc[:0], r"s\.tsv: the sample sheet lists no cell line\. Add a row"),
        (SHEET.assign(cell_line=["K562", "K562"]), r"s\.tsv: cell_line 'K562' appears twice"),
        (SHEET.assign(cell_line=["GM12878", "plots"]), r"the cell line name 'plots' is reserved"),
        (SHEET.assign(genome=["hg19", "mm10"]), r"cell line 'K562' uses genome 'mm10'.*known: hg19, GRCh38"),
        (SHEET.assign(genome=["GRCh38", "hg19"]), r"genomes: 'GRCh38' \(cell line 'GM12878' in s\.tsv\) has no FASTA"),
    ],
)
def test_a_sample_sheet_the_run_cannot_use_is_refused_naming_the_row_and_the_fix(rows, message):
    with pytest.raises(ValueError, match=message):
        check_sample_sheet(rows, GENOMES, "s.tsv")


def test_a_good_sample_sheet_passes_and_a_missing_column_is_left_to_the_schema():
    check_sample_sheet(SHEET, GENOMES, "s.tsv")
    check_sample_sheet(SHEET.drop(columns="genome"), GENOMES, "s.tsv")
