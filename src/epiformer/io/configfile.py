"""The workflow's YAML config as it was read, before its schema sees it.

PyYAML reads YAML 1.1, where a number in exponent form without a dot (`3e-4`, `1e5`) is
text, not a number. The schema would then say only "'3e-4' is not of type 'number'";
`numbers_read_as_text` finds each such value so the error can say what to write instead.
"""

from __future__ import annotations

import re
from decimal import Decimal

EXPONENT_WITHOUT_DOT = re.compile(r"[+-]?\d+[eE][+-]?\d+")


def numbers_read_as_text(config, key: str = "") -> list[tuple[str, str, str]]:
    """(dotted key, value as written, the same number written so that YAML reads it) for each such value."""
    found = []
    if isinstance(config, dict):
        for name, value in config.items():
            found += numbers_read_as_text(value, f"{key}.{name}" if key else str(name))
    elif isinstance(config, list):
        for index, value in enumerate(config):
            found += numbers_read_as_text(value, f"{key}[{index}]")
    elif isinstance(config, str) and EXPONENT_WITHOUT_DOT.fullmatch(config.strip()):
        found.append((key, config, format(Decimal(config.strip()), "f")))
    return found


def check_numbers(config: dict, source: str = "config") -> None:
    """Fail naming the first number YAML read as text, and how to write it."""
    found = numbers_read_as_text(config)
    if found:
        key, written, fixed = found[0]
        raise ValueError(
            f"{source}: {key} is {written!r}, which YAML reads as text, not as a number. Write {fixed} instead."
        )


# A cell line or model name becomes a folder (results/{cell}/{model}/) and a Snakemake wildcard value:
# letters, digits, dot, dash and underscore, starting with a letter or digit.
FOLDER_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
# results/ folders of the run's own, and what they hold; a cell line of one of these names would write into them.
RESERVED_CELL_NAMES = {
    "genomes": "results/genomes/: each genome's store",
    "plots": "results/plots/: the run's figures",
    "pooled": "results/pooled/: pooled models",
    "transfer": "results/transfer/: the transfer tables",
}


def check_folder_names(names, what: str, source: str, reserved: dict | None = None) -> None:
    """Fail naming the first of `names` (cell lines or models, from `source`) that cannot be a folder name, or that
    is `reserved` (name -> the folder it would share and what that holds)."""
    reserved = reserved or {}
    for name in names:
        if not FOLDER_NAME.fullmatch(str(name)):
            raise ValueError(
                f"{source}: {what} {name!r} cannot name a results folder: use letters, digits, '.', '-' and '_' "
                "only (no space or slash), starting with a letter or digit, e.g. "
                f"{re.sub(r'[^A-Za-z0-9._-]+', '_', str(name)).strip('._-') or 'name'!r}."
            )
        if name in reserved:
            raise ValueError(f"{source}: the {what} name {name!r} is reserved ({reserved[name]}); rename that {what}.")


def check_sample_sheet(samples, genomes: dict, source: str) -> None:
    """Fail, naming the sample sheet `source`, the row and the fix, on what its schema cannot see: no row, a cell
    line that cannot be a folder name or appears twice, a genome that `genomes:` lacks or leaves without a path.

    `samples` is the sheet as read (a DataFrame of text); a missing column is left to the schema.
    """
    if samples.empty:
        raise ValueError(
            f"{source}: the sample sheet lists no cell line. Add a row a cell line, tab-separated under "
            "the header `cell_line  pairs  genome` (README, 'Your own genome and cell lines')."
        )
    if "cell_line" in samples.columns:
        check_folder_names(samples["cell_line"], "cell line", source, RESERVED_CELL_NAMES)
        twice = samples["cell_line"][samples["cell_line"].duplicated()]
        if len(twice):
            raise ValueError(f"{source}: cell_line {twice.iloc[0]!r} appears twice; names must be unique.")
    for row in samples.itertuples() if {"cell_line", "genome"} <= set(samples.columns) else ():
        if row.genome not in genomes:
            raise ValueError(
                f"{source}: cell line {row.cell_line!r} uses genome {row.genome!r}, "
                f"which is not a key of `genomes:` in the config (known: {', '.join(genomes)})."
            )
        if not str(genomes[row.genome]).strip():
            # An overlay for a genome the user brings (config/crispri.yaml) leaves its path empty.
            raise ValueError(
                f"genomes: {row.genome!r} (cell line {row.cell_line!r} in {source}) has no FASTA path. "
                f"Give yours: snakemake ... --config 'genomes={{{row.genome}: /path/to/{row.genome}.fa}}' "
                "(plain or bgzip FASTA), or set it in a config file."
            )


def schema_error_in_brief(error: Exception, source: str) -> Exception:
    """A schema's complaint about `source` (the config, a sample sheet) in one sentence and its fix, in place of
    Snakemake's "Error validating config file." followed by the whole schema: `error` is Snakemake's
    WorkflowError or jsonschema's ValidationError (with `message`, `absolute_path`, `validator`)."""
    chain = (error, error.__cause__, error.__context__, *error.args)  # Snakemake raises it inside jsonschema's
    found = [cause for cause in chain if hasattr(cause, "absolute_path")]
    if not found:
        return error
    cause = found[0]
    where = ".".join(str(part) for part in cause.absolute_path)
    fix = {
        "required": "add it",
        "additionalProperties": "a misspelt or moved key? Remove or rename it",
        "type": "write a value of that type",
        "enum": "use one of those",
    }.get(cause.validator, "change it")
    if "sample" in source:
        documented = "the README's 'Your own genome and cell lines' and config/README.md list the columns"
    else:
        documented = "config/config.yaml documents every key with its default; config/README.md has examples"
    return ValueError(f"{source}: {where + ': ' if where else ''}{cause.message}. Fix: {fix} ({documented}).")
