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
