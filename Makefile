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

.PHONY: demo explain demo-long demo-scale real real-random real-attentions test setup bedtools lint clean

demo: setup bedtools
	$(BIN)/snakemake --cores $(CORES)
	$(BIN)/snakemake --cores $(CORES) --report results/report.html
	@echo "Done: results/summary.md, results/plots/, results/report.html"
	@echo "To run snakemake yourself: source $(VENV)/bin/activate"

# Why pairs interact (docs/explain.md): attributions, TF-MoDISco motifs and logos of every
# element-window model, after the main run (which it completes first if need be); then the
# report again, with the logos.
explain: setup bedtools
	$(BIN)/snakemake --cores $(CORES) explain
	$(BIN)/snakemake --cores $(CORES) --report results/report.html all explain
	@echo "Done: results/{cell}/{model}/motifs.tsv, motifs.png, attributions.bw; results/report.html"

# A demo of its own overlay in a folder of its own, so that `make demo`'s results stay as they are: the
# workflow run from the folder, which links config/, then its report.
# $(call demo_run,FOLDER,OVERLAY,FIGURE): FIGURE the results/plots/ file the closing line points at.
define demo_run
	mkdir -p $(1)
	ln -sfn ../../config $(1)/config
	cd $(1) && ../../$(BIN)/snakemake -s ../../Snakefile --cores $(CORES) --configfile $(2)
	cd $(1) && ../../$(BIN)/snakemake -s ../../Snakefile --cores $(CORES) --configfile $(2) \
	  --report results/report.html
	@echo "Done: $(1)/results/summary.md, $(1)/results/plots/$(3), $(1)/results/report.html"
endef

# The insulated long-range demo (config/demo_long.yaml, docs/demo_long.md): M7 on element
# windows, M7 on the whole span beside its length control, softmax on the span, side by side.
demo-long: setup bedtools
	$(call demo_run,runs/demo-long,config/demo_long.yaml,cost.png)

# The demo at real distances (config/demo_scale.yaml, docs/demo_scale.md): spans of 25 kb to 1.9 Mb
# across insulated domains, span models at 128 bp a token beside their length control.
demo-scale: setup bedtools
	$(call demo_run,runs/demo-scale,config/demo_scale.yaml,distance_bins.png)

# The real-data benchmark (TargetFinder pairs on real hg19 sequence, config/targetfinder.yaml).
real: setup bedtools
	$(BIN)/snakemake --configfile config/targetfinder.yaml --cores $(CORES)
	$(BIN)/snakemake --configfile config/targetfinder.yaml --cores $(CORES) --report results/report.html
	@echo "Done: results/summary.md (paired intervals: results/paired_comparison.tsv), results/report.html"

# A part of the real-data benchmark in a folder of its own, beside make real's results: the workflow
# run from a user folder holding links to config/, data/ and the built genome, only the models
# a comparison needs on every cell line, its summary written by `epiformer summary`.
# $(call real_subset,FOLDER,MODELS,OVERLAY): OVERLAY applied after config/targetfinder.yaml.
REAL_CELLS := GM12878 HUVEC HeLa-S3 IMR90
define real_subset
	mkdir -p $(1) resources
	for name in config data resources; do ln -sfn ../../$$name $(1)/$$name; done
	cd $(1) && ../../$(BIN)/snakemake -s ../../Snakefile --cores $(CORES) \
	  $(foreach cell,$(REAL_CELLS),$(foreach model,$(2),results/$(cell)/$(model)/metrics.json)) \
	  --configfile config/targetfinder.yaml $(3)
	$(BIN)/epiformer summary $(1)/results --models $(2)
	@echo "Done: $(1)/results/summary.md and {cell}/{model}/metrics.json"
endef

# The same under a random split (leak-prone, for comparison): M7, its softmax twin, the pooled
# distance-aware M7 and the baselines, one model each (no replicates).
RANDOM_MODELS := linear softmax linear_pooled_distance distance kmer propensity
real-random: setup bedtools
	$(call real_subset,runs/random-split,$(RANDOM_MODELS),config/targetfinder_random.yaml)

# With each attention (config/targetfinder_attentions.yaml): M7's ELU+1 linear attention,
# DeltaNet and Gated DeltaNet, sequence-only and with distance, one model each.
ATTENTIONS_MODELS := linear deltanet gated_deltanet linear_distance deltanet_distance gated_deltanet_distance distance kmer
real-attentions: setup bedtools
	$(call real_subset,runs/real-attentions,$(ATTENTIONS_MODELS),config/targetfinder_attentions.yaml)

test: setup bedtools
	$(BIN)/python -m pytest $(PYTEST_ARGS)

setup: $(STAMP)

$(STAMP): pyproject.toml constraints.txt
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV) || { \
	  echo "Cannot create $(VENV). On Debian/Ubuntu: sudo apt-get install -y python3-venv"; exit 1; }
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -c constraints.txt "$(TORCH)" -e ".[workflow,test,lint,explain]"
	touch $(STAMP)

# System tools from Debian/Ubuntu packages, installed with apt-get when run as root: bedtools,
# and for `make test` hisat2, for the 1 Mb of real GRCh37 chr22 it ships as an example
# (tests/workflow/test_hisat2_region.py reads HISAT2_REFERENCE).
HISAT2_REFERENCE := /usr/share/doc/hisat2/examples/reference/22_20-21M.fa
NEED_HISAT2 := $(filter test,$(MAKECMDGOALS))

bedtools:
	@missing=""; \
	command -v bedtools >/dev/null 2>&1 || missing="bedtools"; \
	if [ -n "$(NEED_HISAT2)" ] && [ ! -f $(HISAT2_REFERENCE) ]; then missing="$$missing hisat2"; fi; \
	missing="$${missing# }"; \
	[ -z "$$missing" ] && exit 0; \
	if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	  echo "Installing $$missing with apt-get"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing; \
	  if [ -n "$(NEED_HISAT2)" ] && [ ! -f $(HISAT2_REFERENCE) ]; then \
	    echo "hisat2 is installed but $(HISAT2_REFERENCE) is not: dpkg may exclude /usr/share/doc" \
	      "here (see /etc/dpkg/dpkg.cfg.d/); allow that path and reinstall hisat2."; exit 1; \
	  fi; \
	else \
	  echo "Missing: $$missing. Install with:  sudo apt-get install -y $$missing"; \
	  case "$$missing" in *bedtools*) \
	    echo "  (bedtools also comes with conda:  conda install -c conda-forge -c bioconda bedtools)";; esac; \
	  exit 1; \
	fi

# Python style and formatting (ruff check, ruff format --check: `$(BIN)/ruff format src tests benchmarks scripts`
# rewrites the files), Snakefile formatting (snakefmt, check only: `$(BIN)/snakefmt Snakefile workflow/Snakefile
# workflow/rules` rewrites the files) and Snakemake's own lints. All four run; any failure fails.
lint: setup
	@status=0; \
	echo "ruff check src tests benchmarks scripts"; \
	$(BIN)/ruff check src tests benchmarks scripts || status=1; \
	echo "ruff format --check src tests benchmarks scripts"; \
	$(BIN)/ruff format --check src tests benchmarks scripts || status=1; \
	echo "snakefmt --check Snakefile workflow/Snakefile workflow/rules/*.smk"; \
	$(BIN)/snakefmt --check Snakefile workflow/Snakefile workflow/rules/*.smk || status=1; \
	echo "snakemake --lint"; \
	$(BIN)/snakemake --lint || status=1; \
	exit $$status

clean:
	rm -rf results logs .epiformer-checkpoints .snakemake runs
