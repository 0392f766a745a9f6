# DLC developer entry points. Every target installs what it needs (Debian, as root).
#   make demo   - set up and run the main job on the embedded default
#   make test   - set up and run the whole test suite (what CI runs)
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
DLC    := $(VENV)/bin/dlc
STAMP  := $(VENV)/.installed

.PHONY: setup demo test lint unit bench clean

$(STAMP): setup.cfg pyproject.toml scripts/setup-python.sh
	PYTHON=$(PYTHON) VENV=$(VENV) bash scripts/setup-python.sh
	touch $(STAMP)

setup: $(STAMP)

lint: setup
	$(VENV)/bin/ruff check dlc tests bench
	$(VENV)/bin/ruff format --check dlc tests bench

unit: setup
	$(PY) -m pytest -q -m "not docker and not mesos and not browser"

test: setup lint
	bash scripts/test.sh

demo: setup
	bash scripts/demo.sh

bench: setup
	$(PY) bench/allocator.py

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache
