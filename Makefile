# Two commands on a fresh machine: `make run` and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# Airflow gets an environment of its own: it cannot share one with TensorFlow's dependencies.
AIRFLOW_VENV := .venv-airflow
AIRFLOW_STAMP := $(AIRFLOW_VENV)/.installed
# NVIDIA DALI, a reader the tests check outputs with (CPU only): its pins are not TensorFlow's.
DALI_VENV := .venv-dali
DALI_STAMP := $(DALI_VENV)/.installed
DALI_PACKAGE := nvidia-dali-cuda120==2.4.0
# TensorFlow Model Garden's decoders, which the tests read outputs with: it pins TensorFlow 2.20.
MODELS_VENV := .venv-models
MODELS_STAMP := $(MODELS_VENV)/.installed
MODELS_PACKAGES := tf-models-official==2.20.0 tensorflow==2.20.0
# The near-copy finders this project is measured against (make bench-near-copies): their pins are
# not TensorFlow's, and imagededup imports torch and torchvision: 2.14.1 and 0.29.1 lie on this machine's
# disk (a CUDA build, about 5.5 GB), and torchvision 0.28 did not load beside torch 2.13.0.
PEERS_VENV := .venv-peers
PEERS_STAMP := $(PEERS_VENV)/.installed
PEERS_PACKAGES := torch==2.14.1 torchvision==0.29.1 imagededup==0.3.3.post2 cleanvision==0.3.7
SAMPLE := work/sample-images
SAMPLE_OUT := work/sample-tfrecords

.PHONY: install airflow dali models peers run test test-fast options bench bench-planning bench-near-planning bench-large \
	bench-incremental bench-near-copies bench-look-alikes bench-paired clean

install: $(STAMP)

$(STAMP): requirements.txt setup.py
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -r requirements.txt -e '.[test]'
	touch $(STAMP)

airflow: $(AIRFLOW_STAMP)

$(AIRFLOW_STAMP): deploy/airflow/requirements.txt
	test -x $(AIRFLOW_VENV)/bin/python || $(PYTHON) -m venv $(AIRFLOW_VENV)
	$(AIRFLOW_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(AIRFLOW_VENV)/bin/python -m pip install --quiet -r deploy/airflow/requirements.txt
	touch $(AIRFLOW_STAMP)

dali: $(DALI_STAMP)

$(DALI_STAMP):
	test -x $(DALI_VENV)/bin/python || $(PYTHON) -m venv $(DALI_VENV)
	$(DALI_VENV)/bin/python -m pip install --quiet $(DALI_PACKAGE)
	touch $(DALI_STAMP)

peers: $(PEERS_STAMP)

$(PEERS_STAMP):
	test -x $(PEERS_VENV)/bin/python || $(PYTHON) -m venv $(PEERS_VENV)
	$(PEERS_VENV)/bin/python -m pip install --quiet $(PEERS_PACKAGES)
	touch $(PEERS_STAMP)

models: $(MODELS_STAMP)

$(MODELS_STAMP):
	test -x $(MODELS_VENV)/bin/python || $(PYTHON) -m venv $(MODELS_VENV)
	$(MODELS_VENV)/bin/python -m pip install --quiet $(MODELS_PACKAGES)
	touch $(MODELS_STAMP)

run: install
	$(BIN)/python -m beam_pipeline.synthetic.sample_set $(SAMPLE)
	$(BIN)/python -m beam_pipeline --input=$(SAMPLE) --output=$(SAMPLE_OUT) --runner=DirectRunner

# Three worker processes per two cores (pytest-xdist): about a third of a test's time is spent
# waiting (on commands it started, the storage emulator, a kill it watches for), so a worker keeps
# two thirds of a core busy and half a worker more per core fills the rest; more only contend for
# the cores (README.md, Development). Each takes a whole file at a time, so that what a file's
# tests share (a conversion, an emulator: module-scoped fixtures) is made once; files in the
# order tests/conftest.py gives them (the long end-to-end ones first).
# Python writes its bytecode caches even where PYTHONDONTWRITEBYTECODE is set: every worker and
# every command a test starts would otherwise compile the same modules again, and pytest
# rewrite every test module's asserts in every worker.
# PYTEST_ARGS narrows it: make test PYTEST_ARGS='-k gcs'; TEST_WORKERS=1 runs one worker.
TEST_WORKERS ?= $(shell $(PYTHON) -c 'import os; cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count(); print((3 * cores + 1) // 2)')
LINTED := beam_pipeline tests benchmarks deploy
test: install airflow dali models
	$(BIN)/python -m ruff check --quiet $(LINTED)
	BEAM_PIPELINE_EXTRA_VENVS=required PYTHONDONTWRITEBYTECODE= $(BIN)/python -m pytest -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder --durations=15 $(PYTEST_ARGS)

# The quick inner loop: the tests of plain functions, without those that run the command or a
# pipeline (marked slow, tests/conftest.py), nor the readers' own environments.
test-fast: install
	$(BIN)/python -m ruff check --quiet $(LINTED)
	PYTHONDONTWRITEBYTECODE= $(BIN)/python -m pytest -n $(TEST_WORKERS) --dist loadfile -m 'not slow' --durations=5 $(PYTEST_ARGS)

# The Flex Template's metadata.json and the README's option table, made from beam_pipeline/core/option_table.py.
options: install
	$(BIN)/python -m beam_pipeline.cli.option_docs .

bench: install
	$(BIN)/python -m benchmarks.run $(BENCH_ARGS)
	$(BIN)/python -m benchmarks.storage
	$(BIN)/python -m benchmarks.large_images

# Planning at scale on synthetic metadata (100K, 1M and 5M records by default; about half an hour).
# PLANNING_ARGS=--incremental: an --incremental update's planning (1M records, 1% changed).
bench-planning: install
	$(BIN)/python -m benchmarks.planning $(PLANNING_ARGS)

# Near-copy grouping (issues 37, 59) on synthetic perceptual hashes: 1M and 2M images at distances
# 6 and 8 by default. NEAR_PLANNING_ARGS='--records 1000000 --distance 8' for one run; add
# '--kind look-alikes' for the frames of fixed cameras, '--on-one-machine' for a local run's grouping.
bench-near-planning: install
	$(BIN)/python -m benchmarks.near_copies_planning $(NEAR_PLANNING_ARGS)

# An --incremental update of 20,000 photos (1% added, 0.1% removed or replaced) against a fresh
# conversion of the same input, side by side, and its output checked against the fresh one's.
# INCREMENTAL_ARGS='--images 2000 --repeat 1' for a quick try; '--commit': the commit at 70,000 shards.
bench-incremental: install
	$(BIN)/python -m benchmarks.incremental $(INCREMENTAL_ARGS)

# Perceptual hashes of near copies (re-saved, downscaled, PNG, brightened, trimmed, mirrored)
# against 2,000 distinct photos: the measurement behind perceptual_hash.NEAR_DISTANCE (about ten
# minutes); then the copies this project and its peers (imagededup, cleanvision) find on one set.
# NEAR_COPIES_ARGS='--photos 200 --copied 100' for a quick try.
bench-near-copies: install peers
	$(BIN)/python -m benchmarks.near_copies $(NEAR_COPIES_ARGS)
	$(BIN)/python -m benchmarks.near_copy_peers $(NEAR_PEERS_ARGS)

# 20,000 frames of two fixed cameras (look-alikes, issue 59) converted split 80/20, with near copies
# grouped and with --near_copies=off. LOOK_ALIKES_ARGS='--images 200000' for more.
bench-look-alikes: install
	$(BIN)/python -m benchmarks.look_alikes $(LOOK_ALIKES_ARGS)

# Whole conversions of the 20,000-photo set by two checkouts, or two sets of flags, in turn: what a
# change costs the run. PAIRED_ARGS='--other ../earlier-worktree' or "--other-flags=--near_copies=off".
bench-paired: install
	$(BIN)/python -m benchmarks.paired $(PAIRED_ARGS)

# A million small photos end to end, against the same run at 20,000 (generates 4 GB once).
bench-large: install
	$(BIN)/python -m benchmarks.large_run $(LARGE_ARGS)

clean:
	rm -rf work build
