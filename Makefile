# The two set-up commands of the README. Both install what is missing first (idempotent).
#   make demo                         # install, generate the demo data, run the main job
#   make test                         # install, run the test suite
# Use an existing environment instead of .venv:  make test PYTHON=/path/to/python
VENV ?= .venv
PYTHON ?= $(VENV)/bin/python
PYTEST_ARGS ?=
DEMO_ARGS ?=

export VENV PYTHON

.PHONY: install demo test clean-demo

install:
	@bash tools/install.sh

demo: install
	$(PYTHON) tools/demo.py $(DEMO_ARGS)

test: install
	$(PYTHON) -m pytest tests $(PYTEST_ARGS)

clean-demo:
	rm -rf data/demo work_dirs/demo
