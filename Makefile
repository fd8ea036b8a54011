# asynclab: `make course` runs the course, `make test` runs the tests, `make lab` opens JupyterLab.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.asynclab-setup
PYTEST := $(BIN)/python -m pytest -p no:cacheprovider
# The unit tests in two processes, a test file to each at a time (pytest-xdist): a 2-core machine runs them in two
# thirds of the time. The answer corpus keeps its own pool of processes.
PARALLEL := -n 2 --dist loadfile
NBVAL  := --nbval --nbval-current-env --nbval-sanitize-with tests/sanitize.cfg --nbval-cell-timeout=300 -p tests.conftest

.PHONY: setup course test unit nbval lab classroom site test-oldest clean

# Virtual environment with everything the course needs. d2l 1.0.3 pins numpy==1.23.5 and other
# ancient versions that break on Python 3.12, so it goes in on its own with --no-deps
# (its real needs are in pyproject.toml).
setup: $(STAMP)
$(STAMP): pyproject.toml constraints.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --disable-pip-version-check -q -c constraints.txt -e ".[course,test,classroom,site]"
	$(BIN)/python -m pip install --disable-pip-version-check -q --no-deps d2l==1.0.3
	touch $(STAMP)

# Execute every notebook headless into build/notebooks (the committed ones stay as they are)
# and write the course figures into figures/.
course: setup
	$(BIN)/asynclab course --out build/notebooks --figures figures

# Unit tests, then strict nbval over every notebook.
test: setup unit nbval
unit: setup
	$(PYTEST) $(PARALLEL) tests
	$(PYTEST) --doctest-modules src/asynclab
nbval: setup
	$(PYTEST) $(NBVAL) notebooks

# An nbgrader course in build/classroom (source, student versions), graded on two example submissions per lesson
# (solved, and as shipped), on this machine (no GPU needed): prints the gradebook.
classroom: setup
	PATH="$(abspath $(BIN)):$$PATH" $(BIN)/asynclab classroom examples build/classroom

# The book of the course in build/site: every lesson page from the notebooks' stored outputs (nothing executes),
# the lesson map, the command and API reference, search. Open build/site/index.html.
site: setup
	$(BIN)/python scripts/build_site.py build/site

# The unit tests and strict nbval with the oldest PyTorch the course supports (CPU), in a venv of its own.
test-oldest:
	bash scripts/test_oldest.sh

lab: setup
	$(BIN)/jupyter lab notebooks

clean:
	rm -rf build $(VENV)
