"""The conda envs in envs/ checked against the code each rule runs, without conda.

Conda channels cannot be reached where CI runs, so no test here creates an env. Instead:

- every `envs/*.yaml` parses as safe YAML, uses conda-forge (+ bioconda) with `nodefaults`,
  and pins every package; pins equal the versions CI tests with pip (the packages installed
  where pytest runs);
- every env has the post-deploy script that installs the epiformer package into it
  (docs/environments.md explains why a post-deploy script and not `pip: -e ../`);
- a static import check: for every rule of the workflow (Snakefile and the files it
  includes), the code it runs (its `script:`, or the `epiformer` CLI named in its `shell:`, and every epiformer
  module reachable from there through imports) imports only third-party packages that the
  rule's `conda:` env declares. Imports inside functions count: a lazy import is still
  executed by some code path of the rule, and a static check cannot tell which.

The check matters more than it looks: Snakemake appends its own `sys.path` to every script
it runs, so a `--sdm conda` run started from a virtualenv quietly imports a package the env
lacks from that virtualenv, and only fails on a machine that does not have it.
"""

from __future__ import annotations

import ast
import dataclasses
import importlib.metadata
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    tomllib = pytest.importorskip("tomli")

REPO = Path(__file__).resolve().parents[2]
PACKAGE_DIR = REPO / "src" / "epiformer"
ENV_FILES = sorted((REPO / "envs").glob("*.yaml"))
ALLOWED_CHANNELS = ("conda-forge", "bioconda", "nodefaults")

# Import name -> the names a conda env may declare it under (conda-forge/bioconda name first,
# then the pip distribution name, for an entry in the env's `pip:` section). Anything not
# listed is expected under its import name, lower case, `_` read as `-`.
IMPORT_PACKAGES = {
    "torch": ("pytorch", "torch"),
    "sklearn": ("scikit-learn",),
    "yaml": ("pyyaml",),
    "matplotlib": ("matplotlib-base", "matplotlib"),
    "PIL": ("pillow",),
    "Bio": ("biopython",),
    "modiscolite": ("modisco-lite",),
    "pyBigWig": ("pybigwig", "pyBigWig"),
}
# Python packages that drive a command-line tool, which the env must also provide.
IMPORT_BINARIES = {"pybedtools": "bedtools"}
# Snakemake puts its own package on the path of every script it runs (`from snakemake...`).
PROVIDED_BY_SNAKEMAKE = {"snakemake"}
# Conda package -> pip distribution, where they differ, to compare pins with what pip installed.
CONDA_TO_PIP = {"pytorch": "torch", "matplotlib-base": "matplotlib"}
# Build tools and the interpreter: pinned, but CI takes whatever the machine has.
NOT_COMPARED_WITH_CI = {"python", "pip", "setuptools"}


@dataclass
class Rule:
    """One `rule`/`checkpoint` block of a Snakefile; paths are absolute, resolved as Snakemake does
    (relative to the file that defines the rule)."""

    name: str
    where: str  # "file:line" of the rule header
    script: Path | None = None
    conda: Path | None = None
    shell: str | None = None
    runs_python_inline: bool = False
    problems: tuple[str, ...] = ()


# -- rules -------------------------------------------------------------------------------------

RULE_HEADER = re.compile(r"^(?:rule|checkpoint)\s+(\w+)\s*:")
USE_RULE = re.compile(r"^use\s+rule\s+(\w+)\s+as\s+(\w+)")  # `use rule a as b with:` inherits a's directives
DIRECTIVE = re.compile(r"^(\s+)(\w+)\s*:(.*)$")


def shown(path: Path) -> str:
    """A path as messages show it: relative to the checkout when inside it."""
    return str(path.relative_to(REPO)) if path.is_relative_to(REPO) else str(path)


def parse_rules(path: Path) -> list[Rule]:
    """The rules of one Snakefile with their `script:`, `conda:` and `shell:` values.

    A line-based reader of the layout snakefmt writes: a rule header at column 0, directives one
    indentation level below it, each value on the directive's line or on the lines below it.
    Values must be plain string literals; anything else is recorded as a problem, because the
    env check cannot follow it.
    """
    lines = path.read_text().splitlines()
    rules, i = [], 0
    while i < len(lines):
        header, derived = RULE_HEADER.match(lines[i]), USE_RULE.match(lines[i])
        if not header and not derived:
            i += 1
            continue
        if derived:
            parent = next(r for r in rules if r.name == derived.group(1))
            rule = dataclasses.replace(parent, name=derived.group(2), where=f"{shown(path)}:{i + 1}")
        else:
            rule = Rule(header.group(1), f"{shown(path)}:{i + 1}")
        i += 1
        block_indent = None
        while i < len(lines) and (not lines[i].strip() or lines[i][0].isspace() or lines[i].lstrip().startswith("#")):
            directive = DIRECTIVE.match(lines[i])
            if not directive or (block_indent is not None and len(directive.group(1)) != block_indent):
                i += 1
                continue
            block_indent = len(directive.group(1))
            keyword, rest, start = directive.group(2), directive.group(3).strip(), i
            i += 1
            value_lines = [rest] if rest else []
            while i < len(lines) and (not lines[i].strip() or len(lines[i]) - len(lines[i].lstrip()) > block_indent):
                value_lines.append(lines[i].strip())
                i += 1
            _set_directive(rule, keyword, "\n".join(value_lines).strip().rstrip(","), path, start)
        rules.append(rule)
    return rules


def _set_directive(rule: Rule, keyword: str, value: str, path: Path, line_index: int) -> None:
    if keyword == "run":
        rule.runs_python_inline = True
        return
    if keyword not in ("script", "conda", "shell"):
        return
    try:
        literal = ast.literal_eval(value)
    except (ValueError, SyntaxError):
        literal = None
    if not isinstance(literal, str):
        rule.problems += (
            (
                f"{shown(path)}:{line_index + 1}: `{keyword}:` of rule {rule.name} is {value!r}, not a "
                "plain string; write the path as a string literal so test_envs.py can check the env"
            ),
        )
        return
    if keyword == "shell":
        rule.shell = literal
    else:
        setattr(rule, keyword, (path.parent / literal).resolve())


INCLUDE = re.compile(r"^\s*include:\s*(.+?)\s*$")


def workflow_files(snakefile: Path) -> list[Path]:
    """`snakefile` and, depth first, the files its `include:` lines name (relative to the including file)."""
    files = [snakefile]
    for line in snakefile.read_text().splitlines():
        include = INCLUDE.match(line)
        if include:
            files += workflow_files((snakefile.parent / ast.literal_eval(include.group(1))).resolve())
    return files


def workflow_rules() -> list[Rule]:
    return [rule for path in workflow_files(REPO / "Snakefile") for rule in parse_rules(path)]


# -- code a rule runs --------------------------------------------------------------------------


def console_scripts() -> dict[str, str]:
    """`[project.scripts]` of pyproject.toml: command -> module it runs."""
    scripts = tomllib.loads((REPO / "pyproject.toml").read_text())["project"].get("scripts", {})
    return {command: target.split(":")[0] for command, target in scripts.items()}


def module_file(module: str) -> Path | None:
    """The source file of an `epiformer...` module (package `__init__.py` for a package), or None."""
    parts = module.split(".")
    if parts[0] != "epiformer":
        return None
    base = PACKAGE_DIR.joinpath(*parts[1:])
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def entry_points(rule: Rule) -> list[Path | str]:
    """The Python code a rule starts: its script, or the modules behind the epiformer commands
    (pyproject `[project.scripts]`, `python -m epiformer...`) named in its shell command."""
    if rule.script is not None:
        return [rule.script]
    modules = []
    if rule.shell:
        for command, module in console_scripts().items():
            if re.search(rf"(^|[\s;&|(]){re.escape(command)}(\s|$)", rule.shell):
                modules.append(module)
        modules += re.findall(r"python3?\s+-m\s+(epiformer[\w.]*)", rule.shell)
    return modules


def entry_files(rule: Rule) -> list[Path]:
    files = []
    for entry in entry_points(rule):
        path = entry if isinstance(entry, Path) else module_file(entry)
        assert path is not None and path.is_file(), (
            f"rule {rule.name} ({rule.where}) runs {entry}, which does not exist"
        )
        files.append(path)
    return files


def _catches_import_error(node: ast.Try) -> bool:
    """Whether a handler of this `try:` names ImportError or ModuleNotFoundError (alone or in a tuple)."""
    for handler in node.handlers:
        types = handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]
        if any(getattr(t, "id", None) in ("ImportError", "ModuleNotFoundError") for t in types):
            return True
    return False


def _is_type_checking(test: ast.expr) -> bool:
    return getattr(test, "id", getattr(test, "attr", None)) == "TYPE_CHECKING"


def _imports(node: ast.AST):
    """(module, names, level, line) for every import statement, skipping `if TYPE_CHECKING:` blocks and
    optional imports (the body of a `try:` that catches ImportError: the code runs without them)."""
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.If) and _is_type_checking(child.test):
            for other in child.orelse:
                yield from _imports(ast.Module(body=[other], type_ignores=[]))
            continue
        if isinstance(child, ast.Try) and _catches_import_error(child):
            for other in child.handlers + child.orelse + child.finalbody:
                yield from _imports(ast.Module(body=[other], type_ignores=[]))
            continue
        if isinstance(child, ast.Import):
            for alias in child.names:
                yield alias.name, (), 0, child.lineno
        elif isinstance(child, ast.ImportFrom):
            yield child.module or "", tuple(a.name for a in child.names), child.level, child.lineno
        yield from _imports(child)


def _local_targets(path: Path, module: str, names: tuple[str, ...], level: int) -> list[Path] | None:
    """Files of the project that an import loads, or None for a third-party/stdlib import."""
    if level:  # relative import inside the package
        package = path.parent.relative_to(PACKAGE_DIR.parent).parts
        module = ".".join([*package[: len(package) - level + 1], *([module] if module else [])])
    top = module.split(".")[0]
    if top == "epiformer":
        parts = module.split(".")
        targets = [module_file(".".join(parts[: k + 1])) for k in range(len(parts))]  # parents run first
        targets += [module_file(f"{module}.{name}") for name in names]  # `from epiformer import train`
        return [t for t in targets if t is not None]
    sibling = path.parent / f"{top}.py"  # Snakemake puts a script's folder on sys.path
    if path.parent != PACKAGE_DIR and sibling.is_file() and sibling != path:
        return [sibling]
    return None


def third_party_imports(entry_files: list[Path]) -> dict[str, list[str]]:
    """Top-level third-party import names reachable from `entry_files` -> where each is imported.

    Follows `import epiformer.x`, `from epiformer.x import y`, `from epiformer import x` and
    relative imports through src/epiformer/; leaves out the standard library (by
    `sys.stdlib_module_names`), `epiformer` itself and `__future__`.
    """
    found: dict[str, list[str]] = {}
    queue, seen = list(entry_files), set()
    while queue:
        path = queue.pop()
        if path in seen:
            continue
        seen.add(path)
        for module, names, level, line in _imports(ast.parse(path.read_text(), filename=str(path))):
            local = _local_targets(path, module, names, level)
            if local is not None:
                queue += local
                continue
            top = module.split(".")[0]
            if top in sys.stdlib_module_names or top == "__future__":
                continue
            found.setdefault(top, []).append(f"{shown(path)}:{line}")
    return found


# -- envs --------------------------------------------------------------------------------------


def normalise(name: str) -> str:
    return name.strip().lower().replace("_", "-")


def conda_spec_name(spec: str) -> str:
    """`bioconda::pyfaidx =0.9.2.2` -> `pyfaidx`."""
    return normalise(re.split(r"[\s=<>!~\[]", spec.split("::")[-1], maxsplit=1)[0])


def load_env(path: Path) -> dict:
    return yaml.safe_load(path.read_text()) or {}


def env_packages(env: dict) -> tuple[list[str], list[str]]:
    """(conda specs, pip requirement lines) of an env file."""
    conda, pip = [], []
    for dependency in env.get("dependencies") or []:
        if isinstance(dependency, dict):
            pip += [str(line) for line in dependency.get("pip") or []]
        else:
            conda.append(str(dependency))
    return conda, pip


def declared_names(env_path: Path) -> set[str]:
    conda, pip = env_packages(load_env(env_path))
    names = {conda_spec_name(spec) for spec in conda}
    names |= {conda_spec_name(line) for line in pip if not line.startswith("-")}
    return names


def undeclared_imports(rule: Rule) -> list[str]:
    """What the code `rule` runs imports but its conda env does not declare, one message each."""
    if rule.conda is None:
        return [f"rule {rule.name} ({rule.where}) runs Python code but has no `conda:` env"]
    if not rule.conda.is_file():
        return [f"rule {rule.name} ({rule.where}): conda env {shown(rule.conda)} does not exist"]
    declared, env_name = declared_names(rule.conda), shown(rule.conda)
    messages = []
    for module, where in sorted(third_party_imports(entry_files(rule)).items()):
        if module in PROVIDED_BY_SNAKEMAKE:
            continue
        accepted = IMPORT_PACKAGES.get(module, (normalise(module),))
        if not declared & set(accepted):
            messages.append(
                f"rule {rule.name}: `import {module}` ({', '.join(where[:3])}) needs {accepted[0]} in {env_name}"
            )
        binary = IMPORT_BINARIES.get(module)
        if binary and binary not in declared:
            messages.append(
                f"rule {rule.name}: `import {module}` runs the `{binary}` program; add {binary} to {env_name}"
            )
    return messages


# -- tests: env files ----------------------------------------------------------------------------


@pytest.fixture(params=ENV_FILES, ids=lambda p: p.name)
def env_path(request) -> Path:
    return request.param


def test_there_are_env_files():
    assert {p.stem for p in ENV_FILES} >= {"genome", "encode", "pytorch", "analysis"}


def test_each_env_is_a_distinct_package_set():
    """Two env files with the same packages would build the same (multi-GB) env twice."""
    package_sets = {path.name: frozenset(env_packages(load_env(path))[0]) for path in ENV_FILES}
    names_by_set: dict[frozenset, list[str]] = {}
    for name, packages in package_sets.items():
        names_by_set.setdefault(packages, []).append(name)
    assert all(len(names) == 1 for names in names_by_set.values()), names_by_set


def test_only_the_pytorch_env_has_pytorch():
    """Figures, summary and baselines run without PyTorch (their imports are checked above)."""
    with_torch = {path.stem for path in ENV_FILES if "pytorch" in declared_names(path)}
    assert with_torch == {"pytorch"}


def test_env_file_parses_with_expected_structure(env_path):
    env = load_env(env_path)
    assert isinstance(env, dict) and set(env) <= {"name", "channels", "dependencies"}, (
        f"{shown(env_path)}: unexpected keys"
    )
    channels = env.get("channels")
    assert channels and channels[0] == "conda-forge" and channels[-1] == "nodefaults", (
        f"{shown(env_path)}: channels must start with conda-forge and end with nodefaults, got {channels}"
    )
    assert set(channels) <= set(ALLOWED_CHANNELS), (
        f"{shown(env_path)}: only {ALLOWED_CHANNELS} are allowed, got {channels}"
    )
    conda, pip = env_packages(env)
    assert conda, f"{shown(env_path)}: no dependencies"
    for spec in conda:
        assert re.fullmatch(r"[A-Za-z0-9_.\-]+ ?==?[0-9][\w.]*", spec.split("::")[-1]), (
            f"{shown(env_path)}: `{spec}` is not pinned; write `name=version` (the version CI tests with pip)"
        )
    for line in pip:
        assert not line.startswith("-e") and not line.startswith("."), (
            f"{shown(env_path)}: pip entry `{line}`: Snakemake copies the env file to .snakemake/conda/ before "
            "creating it, so relative paths there do not point into this checkout; the post-deploy "
            "script installs epiformer (docs/environments.md)"
        )
        assert re.fullmatch(r"[A-Za-z0-9_.\-\[\],]+==[0-9][\w.+]*", line), (
            f"{shown(env_path)}: pip entry `{line}` is not pinned with =="
        )


def test_env_channels_include_bioconda_when_a_package_needs_it(env_path):
    bioconda_only = {"bedtools", "pybedtools", "pyfaidx"}
    names = {conda_spec_name(s) for s in env_packages(load_env(env_path))[0]}
    if names & bioconda_only:
        assert "bioconda" in load_env(env_path)["channels"], (
            f"{shown(env_path)}: {names & bioconda_only} come from bioconda"
        )


def installed_version(conda_name: str) -> str | None:
    """The version CI tests with: the pip-installed distribution, or the `bedtools` on PATH."""
    if conda_name == "bedtools":
        if not shutil.which("bedtools"):
            return None
        out = subprocess.run(["bedtools", "--version"], capture_output=True, text=True, check=True).stdout
        return out.split()[-1].lstrip("v")
    try:
        return importlib.metadata.version(CONDA_TO_PIP.get(conda_name, conda_name))
    except importlib.metadata.PackageNotFoundError:
        return None


def test_env_pins_equal_the_versions_ci_tests(env_path):
    mismatches, compared, missing = [], set(), set()
    pinned_names = set()
    for spec in env_packages(load_env(env_path))[0]:
        name = conda_spec_name(spec)
        pinned_names.add(name)
        pinned = re.split(r"==?", spec, maxsplit=1)[1].strip()
        if name in NOT_COMPARED_WITH_CI:
            continue
        installed = installed_version(name)
        if installed is None:
            missing.add(name)
            continue
        compared.add(name)
        installed = installed.split("+")[0]  # torch 2.13.0+cpu is the CPU build of 2.13.0
        if installed != pinned and not installed.startswith(pinned + "."):
            mismatches.append(f"{name}={pinned} but tests run with {installed}")
    assert not mismatches, f"{shown(env_path)}: pin the versions CI tests with pip: " + "; ".join(mismatches)
    assert not missing, (
        f"{shown(env_path)} pins {', '.join(sorted(missing))}, which the tests cannot compare: not installed "
        "where they run (pip install it; bedtools: apt-get install bedtools), so CI does not test that pin"
    )
    assert compared and compared == pinned_names - NOT_COMPARED_WITH_CI, f"{shown(env_path)}: compared nothing"


def test_every_env_installs_epiformer_with_the_one_post_deploy_script(env_path):
    """Each env's post-deploy script is a link to envs/install-epiformer.sh: one script to keep right, not copies."""
    script = env_path.with_suffix(".post-deploy.sh")
    installer = REPO / "envs" / "install-epiformer.sh"
    assert script.is_symlink() and script.resolve() == installer.resolve(), (
        f"{shown(script)} must be a link to install-epiformer.sh (Snakemake runs it after creating "
        f"{env_path.name}): `ln -sfn install-epiformer.sh {shown(script)}`"
    )
    commands = installer.read_text().replace("\\\n", " ").splitlines()  # continued lines joined
    installs = [line for line in commands if "pip install" in line]
    assert installs and all("--no-deps" in line and "--editable" in line for line in installs), installs
    names = {conda_spec_name(s) for s in env_packages(load_env(env_path))[0]}
    assert {"python", "pip", "setuptools"} <= names, (
        f"{shown(env_path)}: the post-deploy install needs python, pip, setuptools"
    )


# -- tests: rules against their envs ------------------------------------------------------------


def test_rule_parser_finds_the_rules_snakemake_finds():
    snakemake = shutil.which("snakemake") or str(Path(sys.executable).parent / "snakemake")
    if not Path(snakemake).exists():
        pytest.skip("snakemake is not installed")
    listed = subprocess.run([snakemake, "--list-rules"], check=False, cwd=REPO, capture_output=True, text=True)
    assert listed.returncode == 0, listed.stderr
    assert sorted(r.name for r in workflow_rules()) == sorted(listed.stdout.split())


@pytest.mark.parametrize("rule", workflow_rules(), ids=lambda r: r.name)
def test_rule_imports_are_declared_in_its_env(rule):
    assert not rule.problems, "\n".join(rule.problems)
    if rule.runs_python_inline:
        pytest.skip(f"rule {rule.name} has a `run:` block, which runs in Snakemake's own Python, not an env")
    if rule.script is None and rule.shell is None:
        assert rule.conda is None, f"rule {rule.name} ({rule.where}) has a conda env but runs nothing"
        return
    if rule.shell is not None and not entry_points(rule):
        assert rule.conda is not None, f"rule {rule.name} ({rule.where}) runs a shell command without a `conda:` env"
        return
    if rule.script is not None:
        assert rule.script.suffix == ".py", f"rule {rule.name}: only Python scripts are checked, got {rule.script}"
        assert rule.script.is_file(), f"rule {rule.name} ({rule.where}): script {rule.script} does not exist"
    missing = undeclared_imports(rule)
    assert not missing, "\n".join(missing)


# -- tests: the checker itself ------------------------------------------------------------------


def write_rule(tmp_path: Path, script: Path, env: Path) -> Rule:
    """A rule file in tmp_path/rules/ in the layout of workflow/rules/, parsed."""
    smk = tmp_path / "rules" / "check.smk"
    smk.parent.mkdir(parents=True, exist_ok=True)
    smk.write_text(
        "rule check:\n"
        "    output:\n"
        '        "out.txt",\n'
        "    conda:\n"
        f'        "../{env.relative_to(tmp_path)}"\n'
        "    script:\n"
        f'        "../{script.relative_to(tmp_path)}"\n'
    )
    (rule,) = parse_rules(smk)
    return rule


def test_checker_reports_an_import_added_without_its_env_entry(tmp_path):
    script = tmp_path / "scripts" / "windows.py"
    script.parent.mkdir()
    source = (REPO / "scripts" / "windows.py").read_text()
    script.write_text(source)
    env = tmp_path / "envs" / "genome.yaml"
    env.parent.mkdir()
    env.write_text((REPO / "envs" / "genome.yaml").read_text())
    rule = write_rule(tmp_path, script, env)
    assert rule.script == script.resolve() and rule.conda == env.resolve()
    assert undeclared_imports(rule) == []

    script.write_text(source.replace("from epiformer.io.runlog", "import requests\nfrom epiformer.io.runlog", 1))
    (message,) = undeclared_imports(rule)
    assert "import requests" in message and "needs requests in" in message and "windows.py:" in message

    env.write_text(env.read_text().rstrip("\n") + "\n  - requests=2.34.2\n")
    assert undeclared_imports(rule) == []

    # An optional import (the code runs without it) needs no env entry; one caught as anything else does.
    optional = "try:\n    import fla\nexcept (ImportError, RuntimeError):\n    fla = None\n"
    script.write_text(source.replace("from epiformer.io.runlog", optional + "from epiformer.io.runlog", 1))
    assert undeclared_imports(rule) == []
    script.write_text(
        source.replace(
            "from epiformer.io.runlog", optional.replace("ImportError, ", "") + "from epiformer.io.runlog", 1
        )
    )
    assert "import fla" in undeclared_imports(rule)[0]


def test_checker_follows_package_imports_and_binaries(tmp_path):
    """scripts/windows.py imports nothing third-party itself: pybedtools and pyfaidx come through
    epiformer.data.windows -> splits / genome, imported inside functions."""
    found = third_party_imports([REPO / "scripts" / "windows.py"])
    assert found["pybedtools"][0].startswith("src/epiformer/data/splits.py:")
    assert found["pyfaidx"][0].startswith("src/epiformer/data/genome.py:")
    assert "torch" not in found

    env = tmp_path / "envs" / "genome.yaml"
    env.parent.mkdir()
    env.write_text(re.sub(r"\n\s+- bedtools=\S+", "", (REPO / "envs" / "genome.yaml").read_text()))
    rule = Rule("windows", "test", script=REPO / "scripts" / "windows.py", conda=env)
    assert undeclared_imports(rule) == [
        f"rule windows: `import pybedtools` runs the `bedtools` program; add bedtools to {env}"
    ]


def test_checker_reads_epiformer_commands_in_shell():
    rule = Rule("module", "test", shell="python -m epiformer.inference.trained_model > {output}")
    assert entry_points(rule) == ["epiformer.inference.trained_model"]
    assert "torch" in third_party_imports(entry_files(rule))
    if "epiformer" in console_scripts():
        rule = Rule("cli", "test", shell="epiformer predict --model {input.model} > {output}")
        assert entry_points(rule) == [console_scripts()["epiformer"]]
