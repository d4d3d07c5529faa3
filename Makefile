# The two commands a newcomer needs: `make demo` and `make test`.
# Everything else (virtualenv, Debian packages, services) is set up from here.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: install system-deps demo test lint typecheck bench clean

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
	$(BIN)/lint-imports

# mypy over monitor/, consumers/ and batch_axes/: strict on monitor.core and monitor.publish,
# basic elsewhere ([tool.mypy] in pyproject.toml; docs/decisions.md, "Type checking"). Its
# cache (.mypy_cache) makes a second run take seconds. Every `# type: ignore[code]` says why
# on its line: one without a reason fails the target.
typecheck: $(STAMP)
	$(BIN)/mypy
	@if grep -rnP --include='*.py' '# type: ignore(?!\[[^]]+\]  # (?!fmt: skip))' \
		monitor consumers batch_axes tests; then \
		echo "typecheck: a '# type: ignore[code]' above has no reason after it ('  # why')"; \
		exit 1; \
	fi

# Debian packages the tests need: promtool (prometheus), amtool (prometheus-alertmanager),
# a JDK and Maven for the Kafka broker, chromium for the report's browser test. Installed only
# when missing, so a prepared machine needs no network.
system-deps:
	@missing=""; \
	command -v promtool >/dev/null || missing="$$missing prometheus"; \
	command -v java >/dev/null || missing="$$missing openjdk-17-jre-headless"; \
	command -v mvn >/dev/null || missing="$$missing maven"; \
	command -v amtool >/dev/null || missing="$$missing prometheus-alertmanager"; \
	command -v chromium >/dev/null || missing="$$missing chromium"; \
	if [ -n "$$missing" ]; then \
		echo "installing Debian packages:$$missing"; \
		SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
		$$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq --no-install-recommends $$missing; \
	fi

# pytest with two workers, each test file on one of them (its module fixtures and a broker
# per worker): the suite waits on brokers and processes as much as it computes
# (docs/decisions.md, "Suite time"). The documentation site is built into site/ with
# --strict: a broken link, anchor or API reference fails the target.
# --max-worker-restart 0: a worker that dies (a test past its timeout, a segfault) ends the
# run at once, naming the test. pytest-xdist 3.8 under --dist loadfile otherwise hands the
# crashed test to each replacement worker again (xdist PR #1371: nine reruns of a 600 s
# timeout, an hour and a half), or leaves the replacement waiting for work that never comes
# (xdist issues #784 and #1327): CI ran to its limit instead of failing.
test: $(STAMP) system-deps
	$(BIN)/ruff check .
	$(BIN)/lint-imports
	$(MAKE) --no-print-directory typecheck
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --quiet
	$(BIN)/python -m pytest -q -n 2 --dist loadfile --max-worker-restart 0

bench: $(STAMP)
	$(BIN)/vfr-monitor bench axis1

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis .ruff_cache .mypy_cache
