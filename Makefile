# hpcguard: the two quick-start commands are `make demo` and `make test`.
VENV ?= .venv
PY := $(VENV)/bin/python
HPCGUARD := $(VENV)/bin/hpcguard
PYTEST_ARGS ?= -q

.PHONY: setup system-deps demo test bench clean

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

test: setup system-deps
	$(VENV)/bin/pytest $(PYTEST_ARGS)

bench: setup
	$(PY) benchmarks/run_all.py

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache
