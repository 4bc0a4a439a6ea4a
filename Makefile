# rlab — two commands do all the set-up on a fresh machine:
#   make demo   the whole mission on the embedded default corpus, on CPU, in minutes
#   make test   the test suite
# Both create .venv and install into it first (once: a stamp file remembers it).
#
# torch: the default is the CPU wheel this machine keeps on local disk. A CUDA user runs e.g.
#   make install TORCH=torch==2.9.1 TORCH_INDEX=https://download.pytorch.org/whl/cu128

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
TORCH ?= torch==2.13.0
TORCH_INDEX ?=
STAMP := $(VENV)/.stamp-install
PYTEST_ARGS ?=

.PHONY: browser-deps install test test-fast test-slow lint bench bench-smoke demo data clean help gpu-check

help:
	@echo "make demo | test | test-fast | test-slow | lint | bench | bench-smoke | gpu-check | browser-deps | install [TORCH=...] | clean"

install: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q "$(TORCH)" $(if $(TORCH_INDEX),--index-url $(TORCH_INDEX))
	$(BIN)/python -m pip install -q -e ".[test]"
	touch $@

# The report's browser test (tests/report/test_browser.py): playwright into the venv and Debian's Chromium, where
# they install; the test skips, saying which is missing, where they do not.
browser-deps: install
	$(BIN)/python -m pip install -q -e ".[browser]"
	command -v chromium >/dev/null || (apt-get update -qq && apt-get install -y -qq chromium)

# The CI suite: everything that runs on a CPU (GPU tests skip themselves).
test: install
	$(BIN)/python -m pytest -m "not gpu" $(PYTEST_ARGS)

# Inner loop: skip the multi-process / end-to-end tests.
test-fast: install
	$(BIN)/python -m pytest -m "not slow and not gpu" $(PYTEST_ARGS)

test-slow: install
	$(BIN)/python -m pytest -m "slow" $(PYTEST_ARGS)

# Style, format and types: ruff on all Python, mypy on the package (settings in pyproject.toml).
LINT_PATHS := rlab bench tests experiments

lint: install
	$(BIN)/ruff check $(LINT_PATHS)
	$(BIN)/ruff format --check $(LINT_PATHS)
	$(BIN)/mypy

bench: install
	$(BIN)/python -m bench

# Every benchmark at a tiny size (CI runs it after the tests): they still run; the figures mean nothing.
bench-smoke: install
	$(BIN)/python -m bench --smoke

# On a CUDA machine: the CUDA torch build into its own venv (.venv-gpu, so the CPU one stays), then the
# `gpu` tests (they skip themselves on CPU) and the GPU benchmark (real trainer, bf16 + compile, NCCL).
# NANOCHAT_DIR=<a nanochat d314e96 tree> adds nanochat's own base_train as the anchor (it also needs psutil,
# installed into the CUDA venv here: rlab itself does not use it).
GPU_TORCH ?= torch==2.9.1
GPU_EXTRA ?= psutil
GPU_TORCH_INDEX ?= https://download.pytorch.org/whl/cu128
GPU_VENV ?= .venv-gpu

gpu-check:
	$(MAKE) install VENV=$(GPU_VENV) TORCH="$(GPU_TORCH)" TORCH_INDEX="$(GPU_TORCH_INDEX)"
	$(GPU_VENV)/bin/python -m pip install -q $(GPU_EXTRA)
	$(GPU_VENV)/bin/python -c "import torch, sys; ok = torch.cuda.is_available(); print('torch', torch.__version__, 'CUDA', torch.version.cuda, 'GPUs', torch.cuda.device_count()); sys.exit(0 if ok else 'no CUDA device visible: gpu-check needs a GPU machine')"
	$(GPU_VENV)/bin/python -m pytest -m gpu -q -p no:cacheprovider $(PYTEST_ARGS)
	$(GPU_VENV)/bin/python -m bench gpu

# The whole mission; it stops after pretraining, saying why, if the base fails the go/no-go check.
demo: install
	$(BIN)/rlab demo

# Only the corpus + tokenizer of the demo (idempotent).
data: install
	$(BIN)/rlab data prepare --base-dir .cache/demo --copy-records

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis
