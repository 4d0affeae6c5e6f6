#!/usr/bin/env bash
# Installs the epiformer package into a conda env. Snakemake runs <env>.post-deploy.sh once,
# inside the env, right after creating it from <env>.yaml; every envs/<env>.post-deploy.sh is a
# symbolic link to this one file (tests/infrastructure/test_envs.py checks). Why this way (docs/environments.md has the details):
# - editable, from the checkout: the env runs the working tree's src/epiformer, so editing
#   the package needs no new env;
# - --no-deps: <env>.yaml lists every package this env's rules import (checked by the tests);
#   without it pip would fetch the package's whole dependency list, PyTorch included, from PyPI;
# - not `pip: [-e ../]` in the env file: Snakemake copies the env file into .snakemake/conda/
#   (or --conda-prefix) before creating the env, so a relative path there misses the checkout.
set -euo pipefail
source_dir="${EPIFORMER_SOURCE:-$PWD}"
if ! grep -qs '^name = "epiformer"' "$source_dir/pyproject.toml"; then
  echo "No epiformer checkout in $source_dir: run snakemake in the epiformer folder (the one with" \
    "pyproject.toml), or set EPIFORMER_SOURCE=/path/to/epiformer." >&2
  exit 1
fi
python -m pip install --quiet --disable-pip-version-check --no-index --no-deps --no-build-isolation \
  --editable "$source_dir"
