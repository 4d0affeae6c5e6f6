"""model.json's one owner (epiformer.io.model_description)."""

import json

import pytest

from epiformer.io.model_description import (
    ModelDescriptionError,
    read_description,
    read_description_if_any,
    write_description,
)
from tests.helpers import REPO, modules_spelling

DESCRIPTION = {"model": {"attention": "linear"}, "windows": {"enhancer_width": 300, "promoter_width": 200}}


def test_a_description_written_is_read_back_as_it_was(tmp_path):
    write_description(tmp_path / "linear", DESCRIPTION)
    assert read_description(tmp_path / "linear") == DESCRIPTION
    assert json.loads((tmp_path / "linear" / "model.json").read_text()) == DESCRIPTION
    assert [path.name for path in (tmp_path / "linear").iterdir()] == ["model.json"]  # no temporary left


@pytest.mark.parametrize(
    "text, why",
    [("{ not json", "JSONDecodeError"), ('{"windows": {}}', "KeyError: 'model'"), ('{"model": {}}', "KeyError")],
)
def test_a_file_that_is_not_a_description_is_named_with_the_fix(tmp_path, text, why):
    (tmp_path / "model.json").write_text(text)
    with pytest.raises(ModelDescriptionError, match=rf"{tmp_path / 'model.json'} is not a model description.*{why}"):
        read_description(tmp_path)
    assert read_description_if_any(tmp_path / "nowhere") == {}


def test_no_other_module_names_model_json():
    """Every reader and writer of model.json goes through its owner: no other module of the package or the
    rule scripts spells the file's name in code (docstrings and comments may)."""
    assert modules_spelling("model.json", REPO / "src" / "epiformer" / "io" / "model_description.py") == []
