# The two commands of the quick start. Each creates .venv when missing and installs what it needs.
#   make demo   the bank-marketing pilot on the bundled data (without `duration`, which leaks the label)
#   make test   lint, the documentation build and the test suite (what CI runs)
#   make docs   the documentation site, into site/ (mkdocs build --strict: a warning fails it)
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
# torch is installed first and pinned: the CPU build of 2.13.0 (an unpinned torch pulls a multi-GB CUDA build).
TORCH := torch==2.13.0
STAMP := $(VENV)/.installed

.PHONY: demo test lint docs install clean bench fuzz browser

$(PY):
	$(PYTHON) -m venv $(VENV)

$(STAMP): pyproject.toml | $(PY)
	$(PY) -m pip install --quiet --disable-pip-version-check "$(TORCH)"
	$(PY) -m pip install --quiet --disable-pip-version-check -e ".[dev]"
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/vsplit pilot bank-marketing-no-duration

lint: $(STAMP)
	$(PY) -m ruff check vsplit datasets tests benchmarks tutorials docs/hooks

# NO_MKDOCS_2_WARNING: mkdocs-material prints a banner about its successor on every build otherwise
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict --quiet

# The console's browser tests (tests/test_console_browser.py) need Debian's headless Chromium and its driver: installed
# here when missing, only as root with apt-get (CI); a developer without them sees those tests skipped, with the reason
browser:
	@if ! command -v chromium >/dev/null || ! command -v chromedriver >/dev/null; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	    { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver >/dev/null; } \
	    || echo "make: installing chromium failed: the console's browser tests will skip"; \
	  else echo "make: no chromium/chromedriver (not root or no apt-get): the console's browser tests will skip"; fi; \
	fi

# Two workers, one per core of the CI machine; a test file stays on one worker (its module fixtures run once)
test: $(STAMP) lint docs browser
	$(PY) -m pytest -n 2 --dist loadfile --durations=30

bench: $(STAMP)
	$(PY) benchmarks/quality.py
	$(PY) benchmarks/train_overhead.py

# Atheris on every decoder of peer messages and files (benchmarks/fuzz.py; FUZZ_SECONDS per target)
FUZZ_SECONDS ?= 60
fuzz: $(STAMP)
	$(PY) -c "import atheris" 2>/dev/null || $(PY) -m pip install --quiet --disable-pip-version-check -e ".[fuzz]"
	$(PY) benchmarks/fuzz.py --seconds $(FUZZ_SECONDS)

clean:
	rm -rf $(VENV) runs .pytest_cache site
