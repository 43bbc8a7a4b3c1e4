# pyproflab developer commands. `make test` and `make demo` each work on a
# fresh machine: they run `setup` first, which is idempotent.

PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
DB     ?= pyproflab.duckdb

.PHONY: setup helper system-deps go-deps test test-fast fuzz fuzz-trace fuzz-mutate demo bench bench-gc lint lab report clean

setup: $(STAMP) helper

# pyproflab's helper in Go (pyproflab/_go: traces, PGO source checks), built into the
# cache where pyproflab/gohelper.py looks; skipped, with one line, without Go.
helper: $(STAMP)
	$(PY) -m pyproflab.gohelper build

# Reinstall only when the project's own dependency list or a C extension
# changes (the editable install compiles them, after the headers they use).
$(STAMP): pyproject.toml setup.py pyproflab/decode/_wire.c pyproflab/keying/_blake.c pyproflab/_intern.c \
		pyproflab/decode/_inflate.c pyproflab/sources/_promtext.c
	sh scripts/install-build-deps.sh
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	# setuptools notes every editable install of this layout with a UserWarning that
	# pip prints even with --quiet (make demo's first screen): not for the user.
	PYTHONWARNINGS=ignore::UserWarning $(PY) -m pip install --quiet -e '.[dev,notebooks,spark]'
	touch $(STAMP)

# System packages the tests use (Debian's prometheus and chromium, a Java runtime
# for Spark); installs only what is missing, and only as root; without them
# those tests skip and say why.
system-deps:
	sh scripts/install-system-deps.sh

# The Go modules of the demo fleet (tests/fleet: client_golang), of the SDK
# pushers (tests/pushers: dd-trace-go's profiler, pyroscope-go) and of the
# tests' Go programs (tests/goprogs: golang.org/x/exp/trace), from the Go
# module proxy into the module cache, so that the tests' builds, which run with
# GOPROXY=off, find them on a fresh machine.
go-deps:
	cd tests/fleet && go mod download
	cd tests/pushers && go mod download
	cd tests/goprogs && go mod download
	cd pyproflab/_go && go mod download

test: setup system-deps go-deps
	$(PY) -m pytest -q

# Everything but the slow fleet-scale tests.
test-fast: setup system-deps go-deps
	$(PY) -m pytest -q -m 'not slow'

# Seeded mutation fuzzing of decode and ingest (tests/decode/test_fuzz_decode.py;
# make test runs 1,000 cases of it).
FUZZ_CASES ?= 20000
fuzz-mutate: setup
	PYPROFLAB_FUZZ_CASES=$(FUZZ_CASES) $(PY) -m pytest -q -s tests/decode/test_fuzz_decode.py

# Coverage-guided fuzzing of the decoder (fuzz/decode.py): atheris/libFuzzer runs
# FUZZ_RUNS inputs through the C, numpy and reference decoders, the C extension
# built with AddressSanitizer, UndefinedBehaviorSanitizer and libFuzzer's edge
# counters (clang; scripts/install-fuzz-deps.sh). Findings go to .fuzz/findings/.
FUZZ_RUNS  ?= 100000
FUZZ_DIR   := .fuzz
FUZZ_WIRE  := $(FUZZ_DIR)/_wire_asan.so
FUZZ_STAMP := $(VENV)/.fuzz-installed
FUZZ_FLAGS ?= -seed=1 -max_len=16384 -timeout=30 -rss_limit_mb=3072 -print_final_stats=1

$(FUZZ_STAMP): $(STAMP)
	sh scripts/install-fuzz-deps.sh
	$(PY) -m pip install --quiet -e '.[dev,notebooks,fuzz]'
	touch $@

# Compiled with the sanitizers, linked without their runtimes (which come from
# atheris's asan_with_fuzzer.so, preloaded), so clang's compiler-rt is not needed.
$(FUZZ_WIRE): pyproflab/decode/_wire.c $(FUZZ_STAMP)
	mkdir -p $(FUZZ_DIR)
	clang -c -fPIC -g -O1 -fno-omit-frame-pointer \
	    -fsanitize=address,undefined,fuzzer-no-link -fno-sanitize-recover=all \
	    -I"$$($(PY) -c 'import sysconfig; print(sysconfig.get_paths()["include"])')" \
	    -o $(FUZZ_DIR)/_wire_asan.o pyproflab/decode/_wire.c
	clang -shared -o $@ $(FUZZ_DIR)/_wire_asan.o

# Coverage-guided fuzzing of the Go helper's trace reader (go test -fuzz):
# any bytes give a whole output or one error, never a crash or a hang.
FUZZ_TRACE_INPUTS ?= 100000
fuzz-trace:
	cd pyproflab/_go && go test ./internal/trace -run '^$$' -fuzz FuzzConvert \
		-fuzztime $(FUZZ_TRACE_INPUTS)x -parallel 2

fuzz: $(FUZZ_WIRE)
	$(PY) fuzz/decode.py seed $(FUZZ_DIR)/seeds
	mkdir -p $(FUZZ_DIR)/corpus $(FUZZ_DIR)/findings
	LD_PRELOAD="$$($(PY) -c 'import atheris; print(atheris.path())')/asan_with_fuzzer.so" \
	ASAN_OPTIONS=detect_leaks=0:malloc_context_size=4:quarantine_size_mb=64 \
	UBSAN_OPTIONS=print_stacktrace=1 \
	PYPROFLAB_FUZZ_WIRE=$(FUZZ_WIRE) \
	    $(PY) fuzz/decode.py run $(FUZZ_DIR)/corpus $(FUZZ_DIR)/seeds \
	    -runs=$(FUZZ_RUNS) $(FUZZ_FLAGS) -artifact_prefix=$(FUZZ_DIR)/findings/

# The main job on the embedded default store (./$(DB)).
demo: setup
	$(PY) tests/support/fleet_demo.py --db $(DB)

bench: setup
	$(PY) -m bench --out .bench

# Record the GC validation workloads at every GOGC setting, nine runs each (~95 min;
# each run in a CPU group of its own that comes before other work, see
# bench/gc_record.py; needs root; run it with nothing else on the machine: a
# neighbour slowed batch by a fifth) and rewrite the trimmed test data;
# then print the model's predictions against it.
bench-gc: setup
	$(PY) -m bench.gc_record --out .bench/gc --testdata tests/testdata/gc/work
	$(PY) -m bench.gc_record --out .bench/gc --testdata tests/testdata/gc/quota --quota \
	    --workloads service --settings 100,200 --reps 2
	$(PY) -m bench.gc_validate

lint: setup
	$(VENV)/bin/ruff check pyproflab tests bench fuzz
	$(VENV)/bin/mypy
	$(VENV)/bin/ruff format --check pyproflab tests bench fuzz

# The offline HTML report of the default store (run make demo first).
report: setup
	$(PY) -m pyproflab report --db $(DB) -o report.html

lab: setup
	$(VENV)/bin/jupyter lab notebooks/

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache .bench .demo .fuzz
