# Two commands do all the set-up on a fresh machine: `make serve` and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: serve test generate bench

$(STAMP): pyproject.toml clients/python/pyproject.toml scripts/install_deploy_tools.py scripts/install_browser.py
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e clients/python -e '.[dev]'
	$(BIN)/python scripts/install_deploy_tools.py
	$(BIN)/python scripts/install_browser.py
	touch $(STAMP)

serve: $(STAMP)
	$(BIN)/memplane serve

test: $(STAMP)
	$(BIN)/python -m pytest

generate: $(STAMP)
	$(BIN)/python scripts/gen_proto.py

bench: $(STAMP)
	$(BIN)/python bench/foundation.py
