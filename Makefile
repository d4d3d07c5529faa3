# The two commands a newcomer needs: `make demo` and `make test`.
# Everything else (virtualenv, Debian packages, services) is set up from here.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: install demo test lint bench clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(BIN)/vfr-monitor demo

lint: $(STAMP)
	$(BIN)/ruff check .

test: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/python -m pytest -q

bench: $(STAMP)
	$(BIN)/vfr-monitor bench axis1

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis .ruff_cache
