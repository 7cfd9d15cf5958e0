# The two set-up commands: `make run` (the main job on the embedded default) and `make test`.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

export KEDRO_DISABLE_TELEMETRY := 1
export DO_NOT_TRACK := 1
export DVC_NO_ANALYTICS := 1
export HF_HUB_OFFLINE := 1

.PHONY: run test test-slow install fractals benchmarks viz lineage-site lock mutation mutation-survivors mutation-sample clean

run: $(STAMP)
	$(BIN)/kedro run --pipelines=pretrain

# Most cases spend much of their time on one core (child processes, git, DVC, servers, small tensors): two workers,
# each taking whole files so that module fixtures build once, run them side by side; TEST_WORKERS=0 runs them in order.
TEST_WORKERS ?= 2
PYTEST := $(BIN)/python -m pytest -n $(TEST_WORKERS) --dist loadfile

test: $(STAMP)
	$(PYTEST) -m "not slow"

test-slow: $(STAMP)
	$(PYTEST) -m slow

install: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet -e ".[dev]"
	touch $(STAMP)

benchmarks: $(STAMP)
	$(BIN)/python benchmarks/render_speed.py --size 256 --points 100000 --images 200 --mode point --json
	$(BIN)/python benchmarks/render_speed.py --size 256 --points 100000 --images 200 --mode patch --json

# dvc.lock brought back in line with the code and configuration (tests/project/test_dvc_lock.py says when it is not):
# each stage's src/ dependencies written as the code it runs (python -m fdsml.stage_code), then every stage whose code,
# configuration or inputs changed runs again (all of them: about 10 minutes on 2 cores); then commit dvc.yaml and dvc.lock.
lock: $(STAMP)
	$(BIN)/python -m fdsml.stage_code --write
	PATH=$(CURDIR)/$(BIN):$$PATH $(BIN)/dvc repro
	$(BIN)/python -m pytest -q tests/project/test_dvc_lock.py

# Mutation testing of the modules that decide the numbers (docs/mutation.md), outside CI: minutes to an hour
# per unit on 2 cores, at low priority; UNIT=seeds (a unit of tests/mutation.py) runs one.
mutation: $(STAMP)
	nice -n 15 $(BIN)/python -m tests.mutation $(UNIT)

# Only the survivors of a unit's last run, against the tests as they are now (after writing tests for them).
mutation-survivors: $(STAMP)
	nice -n 15 $(BIN)/python -m tests.mutation --survivors $(UNIT)

# A seeded sample of a unit too slow to run whole (SAMPLE mutants, SEED 0 unless given), on every CPU: its score estimated.
mutation-sample: $(STAMP)
	nice -n 15 $(BIN)/python -m tests.mutation --sample $(SAMPLE) --seed $(or $(SEED),0) $(UNIT)

viz: $(STAMP)
	$(BIN)/kedro viz run --env base --no-browser --host 127.0.0.1 --port 4141

# the static lineage site on the default DVC remote (docs/lineage-site.md)
lineage-site: $(STAMP)
	$(BIN)/python -m fdsml.lineage_site

clean:
	rm -rf $(VENV) .pytest_cache
