# Two commands on a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.bnnkit-installed

.PHONY: demo test test-fast lint bench clean

$(STAMP): pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e ".[dev]"
	@touch $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/bnnkit hmc --dataset yacht_0 --model mlp_regression_small \
	  --weight-decay 1.0 --temperature 1.0 --step-size 1e-3 --trajectory-len 0.1 \
	  --num-iterations 150 --num-burn-in 50 --num-chains 4 --max-num-leapfrog-steps 2000 \
	  --seed 0 --dir runs/demo_yacht_0 --overwrite

test: $(STAMP)
	$(PY) -m pytest -q

test-fast: $(STAMP)
	$(PY) -m pytest -q -m "not slow"

lint: $(STAMP)
	$(VENV)/bin/ruff check .

bench: $(STAMP)
	$(PY) benchmarks/hmc_overhead.py

clean:
	rm -rf runs .pytest_cache
