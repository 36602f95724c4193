# The two set-up commands of the README. Both install what is missing first (idempotent).
#   make demo                         # install, generate the demo data, run the main job
#   make test                         # install, run the test suite on every core
#   make test-fast                    # the suite without the slow tests (the edit loop)
# Use an existing environment instead of .venv:  make test PYTHON=/path/to/python
VENV ?= .venv
PYTHON ?= $(VENV)/bin/python
PYTEST_ARGS ?=
# pytest-xdist workers: every core the machine has; tests of one trained model share it
PYTEST_WORKERS ?= auto
DEMO_ARGS ?=

export VENV PYTHON

.PHONY: install demo test test-fast clean-demo

install:
	@bash tools/install.sh

demo: install
	$(PYTHON) tools/demo.py $(DEMO_ARGS)

test: install
	$(PYTHON) -m pytest tests -n $(PYTEST_WORKERS) --dist loadgroup $(PYTEST_ARGS)

test-fast: install
	$(PYTHON) -m pytest tests -n $(PYTEST_WORKERS) --dist loadgroup -m "not slow" $(PYTEST_ARGS)

clean-demo:
	rm -rf data/demo work_dirs/demo
