# epiformer: `make demo` runs the whole workflow on the built-in demo; `make test` runs the tests.
# Python packages go into a project virtual environment, .venv/ (override with VENV=...).

VENV ?= .venv
PYTHON ?= python3
BIN := $(VENV)/bin
CORES ?= all
# A CPU build of PyTorch; a bare `torch` would pull a multi-GB CUDA build. On a GPU machine
# install the CUDA build of the same version into $(VENV) first; pip keeps it.
TORCH ?= torch==2.13.0
STAMP := $(VENV)/.epiformer-installed

.PHONY: demo test setup bedtools lint clean

demo: setup bedtools
	$(BIN)/snakemake --cores $(CORES)
	$(BIN)/snakemake --cores $(CORES) --report results/report.html
	@echo "Done: results/summary.md, results/plots/, results/report.html"
	@echo "To run snakemake yourself: source $(VENV)/bin/activate"

test: setup bedtools
	$(BIN)/python -m pytest $(PYTEST_ARGS)

setup: $(STAMP)

$(STAMP): pyproject.toml constraints.txt
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV) || { \
	  echo "Cannot create $(VENV). On Debian/Ubuntu: sudo apt-get install -y python3-venv"; exit 1; }
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -c constraints.txt "$(TORCH)" -e ".[workflow,test,lint]"
	touch $(STAMP)

bedtools:
	@command -v bedtools >/dev/null 2>&1 && exit 0; \
	if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	  echo "Installing bedtools with apt-get"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends bedtools; \
	else \
	  echo "bedtools is missing. Install it with:  sudo apt-get install -y bedtools"; \
	  echo "  (or, with conda:  conda install -c conda-forge -c bioconda bedtools)"; \
	  exit 1; \
	fi

# Python style (ruff), Snakefile formatting (snakefmt, check only: `$(BIN)/snakefmt Snakefile
# workflow/rules` rewrites the files) and Snakemake's own lints. All three run; any failure fails.
lint: setup
	@status=0; \
	echo "ruff check src tests benchmarks scripts"; \
	$(BIN)/ruff check src tests benchmarks scripts || status=1; \
	echo "snakefmt --check Snakefile workflow/rules/*.smk"; \
	$(BIN)/snakefmt --check Snakefile workflow/rules/*.smk || status=1; \
	echo "snakemake --lint"; \
	$(BIN)/snakemake --lint || status=1; \
	exit $$status

clean:
	rm -rf results logs .epiformer-checkpoints benchmarks/out .snakemake
