# asynclab: `make course` runs the course, `make test` runs the tests, `make lab` opens JupyterLab.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.asynclab-setup
PYTEST := $(BIN)/python -m pytest -p no:cacheprovider
# The unit tests and the notebooks in two processes, a file to each at a time (pytest-xdist): a 2-core machine runs them in two
# thirds of the time. The answer corpus keeps its own pool of processes.
PARALLEL := -n 2 --dist loadfile
NBVAL  := --nbval --nbval-current-env --nbval-sanitize-with tests/sanitize.cfg --nbval-cell-timeout=300 -p tests.conftest

.PHONY: setup course test unit nbval lab instructor-lab classroom site test-oldest clean

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
	$(PYTEST) $(PARALLEL) $(NBVAL) notebooks

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

# JupyterLab on notebooks/, as a learner has it. nbgrader's classroom tools (its menu, Create Assignment, Formgrader,
# Assignments) are the instructor's: this lab turns its JupyterLab extension and its server extensions off through the
# Jupyter config folder jupyter-learner/, which JUPYTER_CONFIG_PATH puts before the environment's own.
LEARNER_CONFIG := JUPYTER_CONFIG_PATH="$(CURDIR)/jupyter-learner$${JUPYTER_CONFIG_PATH:+:$$JUPYTER_CONFIG_PATH}"
lab: setup
	$(LEARNER_CONFIG) $(BIN)/jupyter lab notebooks

# JupyterLab with nbgrader's tools, in an nbgrader course folder (COURSE, by default build/classroom, which
# `make classroom` writes): the instructor's lab (docs/instructors.md).
COURSE ?= build/classroom
instructor-lab: setup
	test -f $(COURSE)/nbgrader_config.py || \
	  { echo "$(COURSE) is no course folder: make classroom, or asynclab classroom source $(COURSE)"; exit 1; }
	cd $(COURSE) && $(abspath $(BIN))/jupyter lab

clean:
	rm -rf build $(VENV)
