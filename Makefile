# hpcguard: the two quick-start commands are `make demo` and `make test`.
VENV ?= .venv
PY := $(VENV)/bin/python
HPCGUARD := $(VENV)/bin/hpcguard
PYTEST_ARGS ?= -q
# Tests mostly wait on brokers, workers and daemons: more xdist workers than cores pays.
TEST_WORKERS ?= 4
FAULT_WORKERS ?= 2

.PHONY: setup system-deps demo test test-faults bench clean

setup: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml
	python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	# torch is pinned in pyproject.toml to the CPU wheel (torch==2.13.0)
	$(PY) -m pip install -q -e '.[test]'
	touch $@

# Real parts the tests use: Slurm (slurm-wlm + munge) and InfluxDB 1.x from Debian.
system-deps:
	@for s in .ci/slurm-setup.sh .ci/influx-setup.sh; do \
		bash $$s || echo "warning: $$s failed: tests that need it skip (and fail under CI=true)"; done

demo: setup
	$(HPCGUARD) demo

# The quick suite (minutes): everything but the fault suite, spread over xdist workers that
# share one embedded broker; then the tests of the real Slurm controller in one process (one
# cluster, and the host's munged, per run).
test: setup system-deps
	$(VENV)/bin/pytest -m "not faults and not slurm" -n $(TEST_WORKERS) $(PYTEST_ARGS)
	$(VENV)/bin/pytest -m "slurm and not faults" $(PYTEST_ARGS)

# The fault suite: fault injection, multi-worker determinism, long end-to-end runs. One file
# per xdist worker: tests/test_faults.py shares one clean run (a module fixture) between its faults.
test-faults: setup system-deps
	$(VENV)/bin/pytest -m faults -n $(FAULT_WORKERS) --dist loadfile $(PYTEST_ARGS)

bench: setup
	$(PY) benchmarks/run_all.py

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache
