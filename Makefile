# Two commands on a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.bnnkit-installed

.PHONY: demo test test-slow test-all lint bench clean

$(STAMP): pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e ".[dev]"
	@touch $(STAMP)

# The real datasets beside a checkout, when they are there (tests skip real-data checks otherwise).
SHARED_DATA := $(wildcard $(CURDIR)/../shared/data)
ifneq ($(SHARED_DATA),)
export BNNKIT_DATA_DIR ?= $(abspath $(SHARED_DATA))
endif

# Four HMC chains on the bundled UCI concrete data (split 0), HMC's no-knob default: 3 to 9
# minutes on 2 CPU cores (2 min 21 s measured on an AVX-512 EPYC, 5 min 26 s on an AVX2 one;
# 5 min 12 s and, in a slower hour of the idle machine, 8 min 19 s on a 2-core AVX-512 Xeon
# ("Intel(R) Xeon(R) Processor") from fresh clones, the installation included, the 4 chains
# split over the 2 cores; the load of the first was not noted).
demo: $(STAMP)
	$(VENV)/bin/bnnkit hmc --dataset concrete_0 --model mlp_regression_small --noise-std 0.35 \
	  --num-iterations 800 --num-burn-in 200 --num-chains 4 --seed 0 --dir runs/demo_concrete_0 --overwrite

# Test processes run in parallel (pytest-xdist); 2 fits the 2-core machines this runs on. Each
# test file runs whole in one process (--dist loadfile), so a file's module-wide fixtures (runs
# made once and read by several tests) are made once, not once in each process.
TEST_WORKERS ?= 2
TEST_DIST ?= --dist loadfile

# Most of a test's time is XLA compiling small programs that other tests (and the slow checks
# after them) compile again, identically: JAX's persistent compilation cache, in the checkout
# and ignored by git, compiles each once. Results are the same bits (the cached executable is
# the one compiled); an unreadable entry is compiled again with a warning. JAX_CACHE= turns it off.
JAX_CACHE ?= $(CURDIR)/.jax_cache
ifneq ($(JAX_CACHE),)
TEST_ENV := JAX_COMPILATION_CACHE_DIR=$(JAX_CACHE) JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS=0 \
  JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES=0
endif

# Everything but the statistical exactness, real-data and end-to-end checks: 9 min 42 s measured
# on a 2-core AVX-512 Xeon ("Intel(R) Xeon(R) Processor") with an empty compilation cache and
# the real data beside it; 8 min 30 s and 10 min 3 s in two runs from a fresh clone without the
# data, a quarter of an hour apart, as the machine's speed wandered (9 min 5 s and 10 min 53 s with the
# installation). A slower processor takes longer.
test: $(STAMP)
	$(TEST_ENV) $(PY) -m pytest -q -n $(TEST_WORKERS) $(TEST_DIST) -m "not slow"

# The statistical exactness checks (samplers against exact posteriors), the real-data checks and
# the whole tiny study (bnnkit paper --scale tiny), and the end-to-end checks: 25 min 24 s on the
# same 2-core Xeon after make test, with the compilation cache make test leaves.
test-slow: $(STAMP)
	$(TEST_ENV) $(PY) -m pytest -q -n $(TEST_WORKERS) $(TEST_DIST) -m slow

test-all: test test-slow

# The linter, and the formatter's check: every file as `ruff format` writes it.
lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

bench: $(STAMP)
	$(PY) benchmarks/hmc_overhead.py

clean:
	rm -rf runs .pytest_cache .jax_cache
