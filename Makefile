# pyproflab developer commands. `make test` and `make demo` each work on a
# fresh machine: they run `setup` first, which is idempotent.

PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
DB     ?= pyproflab.duckdb

.PHONY: setup system-deps test test-fast fuzz demo bench bench-gc lint lab report clean

setup: $(STAMP)

# Reinstall only when the project's own dependency list or the decoder's C
# extension changes (the editable install compiles it).
$(STAMP): pyproject.toml pyproflab/decode/_wire.c
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev,notebooks]'
	touch $(STAMP)

# System packages the tests use (Debian's prometheus); installs only what is
# missing, and only as root; without them those tests skip and say why.
system-deps:
	sh scripts/install-system-deps.sh

test: setup system-deps
	$(PY) -m pytest -q

# Everything but the slow fleet-scale tests.
test-fast: setup system-deps
	$(PY) -m pytest -q -m 'not slow'

# The full decoder fuzz run (tests/test_fuzz_decode.py; make test runs a small one).
FUZZ_CASES ?= 20000
fuzz: setup
	PYPROFLAB_FUZZ_CASES=$(FUZZ_CASES) $(PY) -m pytest -q -s tests/test_fuzz_decode.py

# The main job on the embedded default store (./$(DB)).
demo: setup
	$(PY) tests/fleet_demo.py --db $(DB)

bench: setup
	$(PY) -m bench --out .bench

# Record tests/gcbench at every GOGC setting in both modes (~10 min; each run under
# `heavy` at session priority, see bench/gc_record.py) and rewrite the trimmed test
# data; then print the model's predictions against it.
bench-gc: setup
	$(PY) -m bench.gc_record --out .bench/gc --testdata tests/testdata/gc/bench \
	    --lock priority --rate 150 --duration 12
	$(PY) -m bench.gc_validate

lint: setup
	$(VENV)/bin/ruff check pyproflab tests bench
	$(VENV)/bin/mypy
	$(VENV)/bin/ruff format --check pyproflab tests bench

# The offline HTML report of the default store (run make demo first).
report: setup
	$(PY) -m pyproflab report --db $(DB) -o report.html

lab: setup
	$(VENV)/bin/jupyter lab notebooks/

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache .bench .demo
