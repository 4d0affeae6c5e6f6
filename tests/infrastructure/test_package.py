"""The package's architecture (docs/architecture.md), checked on its import statements.

Subpackages sit in layers; a module imports only from its own subpackage and from lower
layers, never upward or sideways, and the import graph has no cycle. Modules without
PyTorch stay importable where PyTorch is not installed (the analysis and genome envs).
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import REPO

PACKAGE_DIR = REPO / "src" / "epiformer"

# docs/architecture.md draws the same layers.
LAYERS = {
    "constants": 0,
    "io": 1,
    "sequence": 1,
    "data": 2,
    "model": 2,
    "inference": 3,
    "training": 4,
    "evaluation": 4,
    "scoring": 4,
    "interpret": 4,
    "synthetic": 4,
    "plan": 5,  # the run plan reads the config through model, training and data
    "cli": 5,
}

# The modules that need PyTorch; every other module must import without it.
NEEDS_TORCH = {
    "epiformer.data.batches",
    "epiformer.model.ops",
    "epiformer.model.delta_rule",
    "epiformer.model.delta_rule_kernel",
    "epiformer.model.transformer",
    "epiformer.model.scaling",
    "epiformer.model.ensemble",
    "epiformer.model.onehot_lookup",
    "epiformer.inference.devices",
    "epiformer.inference.trained_model",
    "epiformer.training.checkpoints",
    "epiformer.training.distributed",
    "epiformer.training.train",
    "epiformer.training.steps",
    "epiformer.training.validation",
    "epiformer.training.outputs",
    "epiformer.evaluation.evaluate",
    "epiformer.evaluation.transfer",
    "epiformer.scoring.new_pairs",
    "epiformer.scoring.predict",
    "epiformer.scoring.variants",
    "epiformer.interpret.attributions",
    "epiformer.interpret.span_attributions",
}


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE_DIR.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(path): path for path in sorted(PACKAGE_DIR.rglob("*.py"))}


def imported_modules(path: Path) -> set[str]:
    """The epiformer modules a file imports, at any depth (imports inside functions included)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]
        else:
            continue
        found |= {name for name in names if name in MODULES and name != "epiformer"}
    return found


def concern(module: str) -> str | None:
    """The layer key of a module: its subpackage, or its own name at the top level."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else None


GRAPH = {module: imported_modules(path) for module, path in MODULES.items()}


def test_every_subpackage_and_top_level_module_has_a_layer():
    assert {concern(module) for module in MODULES} - {None} == set(LAYERS)


def test_nothing_imports_upward_or_sideways():
    offences = []
    for module, imports in GRAPH.items():
        here = concern(module)
        for target in imports:
            there = concern(target)
            if here is None or there == here:
                continue
            if LAYERS[there] >= LAYERS[here]:
                offences.append(f"{module} imports {target} ({there} is not below {here})")
    assert offences == []


def test_the_model_imports_only_its_configs_and_the_constants():
    for module, imports in GRAPH.items():
        if concern(module) == "model":
            assert {concern(target) for target in imports} <= {"model", "constants"}, module


def test_the_import_graph_has_no_cycle():
    state: dict[str, str] = {}

    def visit(module: str, path: list[str]) -> None:
        state[module] = "open"
        for target in sorted(GRAPH[module]):
            if state.get(target) == "open":
                pytest.fail("import cycle: " + " -> ".join([*path, module, target]))
            if target not in state:
                visit(target, [*path, module])
        state[module] = "done"

    for module in MODULES:
        if module not in state:
            visit(module, [])


def test_the_import_checks_see_an_upward_import(tmp_path):
    """The checker itself: an import of training from data is found."""
    source = tmp_path / "shards.py"
    source.write_text("def f():\n    from epiformer.training.train import train_model\n")
    assert imported_modules(source) == {"epiformer.training.train"}


TORCH_BLOCKER = """
import importlib, sys
class NoTorch:
    def find_spec(self, name, path=None, target=None):
        if name == "torch" or name.startswith("torch."):
            raise ModuleNotFoundError(f"No module named {name!r} (blocked by the test)")
sys.meta_path.insert(0, NoTorch())
for name in sys.argv[1:]:
    importlib.import_module(name)
    print("imported", name)
"""


def test_modules_without_pytorch_import_where_it_is_missing():
    light = sorted(set(MODULES) - NEEDS_TORCH)
    done = subprocess.run([sys.executable, "-c", TORCH_BLOCKER, *light], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.count("imported") == len(light) > 30
    blocked = subprocess.run([sys.executable, "-c", TORCH_BLOCKER, "epiformer.model.ops"], capture_output=True)
    assert blocked.returncode != 0  # the blocker works


# Each file format a run writes has one owner module: the only one whose code holds a path to the file, so every
# reader and writer goes through it (issue 41). Docstrings, help texts and messages may name it.
FILE_OWNERS = {
    "model.json": {"io/model_description.py"},
    "manifest.json": {"data/shards.py", "data/genome_store.py"},  # shard folders', the genome store's
    "metrics.json": {"io/metrics_file.py"},
    "selection.tsv": {"evaluation/selection.py"},
    "train_log.tsv": {"training/outputs.py"},
}


def path_to(name: str, text: str) -> bool:
    """Whether a string of code is a path to file `name` (`name`, `.../name`), not prose that mentions it (help
    texts and error messages may name a file)."""
    return not any(space in text for space in " \n\t") and (text == name or text.endswith("/" + name))


def modules_naming(files, package_dir: Path = PACKAGE_DIR) -> dict[str, set[str]]:
    """For each file name, the modules (paths below the package) whose code, docstrings left out, names it."""
    found = {name: set() for name in files}
    for path in sorted(package_dir.rglob("*.py")):
        tree = ast.parse(path.read_text(), filename=str(path))
        docstrings = {
            id(node.body[0].value)
            for node in ast.walk(tree)
            if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
            and node.body
            and isinstance(node.body[0], ast.Expr)
        }
        texts = [
            node.value
            for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings
        ]
        for name in files:
            if any(path_to(name, text) for text in texts):
                found[name].add(path.relative_to(package_dir).as_posix())
    return found


def test_each_run_file_is_named_in_its_owner_module_only():
    assert modules_naming(FILE_OWNERS) == FILE_OWNERS


def test_the_owner_check_sees_a_second_module_naming_a_file(tmp_path):
    (tmp_path / "owner.py").write_text('"""Reads model.json."""\nMODEL_JSON = "model.json"\n')
    reader = 'def f(d):\n    """Not model.json\'s owner."""\n    return open(d + "/model.json").read()\n'
    (tmp_path / "reader.py").write_text(reader)
    (tmp_path / "quiet.py").write_text('"""Mentions model.json."""\nHELP = "the folder holds model.json"\n')
    assert modules_naming(["model.json"], tmp_path) == {"model.json": {"owner.py", "reader.py"}}


def test_the_architecture_page_names_every_module_in_its_folders_row():
    page = (REPO / "docs" / "architecture.md").read_text()
    rows = dict(re.findall(r"^\| `([a-z_]+/|[a-z_]+\.py)` \| (.*)$", page, re.M))  # the folder table's rows
    missing = []
    for path in sorted(PACKAGE_DIR.rglob("*.py")):
        relative = path.relative_to(PACKAGE_DIR)
        if path.stem == "__init__":
            continue
        if len(relative.parts) == 1:
            missing += [] if relative.name in rows else [f"{relative}: no row"]
        elif f"`{path.stem}`" not in rows.get(relative.parts[0] + "/", ""):
            missing.append(f"{relative}: not named in the {relative.parts[0]}/ row")
    assert missing == []


def test_no_code_is_loaded_by_file_path_and_the_package_imports_no_benchmark():
    # The workflow's scaling rule measures with the package's own code (epiformer.model.scaling), which
    # benchmarks/scaling.py calls too; nothing reaches into benchmarks/ by path or by import.
    assert not any("benchmark" in module for module in MODULES)
    assert not any("benchmarks" in target for imports in GRAPH.values() for target in imports)
    for folder in ("src", "scripts", "workflow", "benchmarks"):
        for path in (REPO / folder).rglob("*.py"):
            assert "spec_from_file_location" not in path.read_text(), path
