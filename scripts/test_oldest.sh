#!/usr/bin/env bash
# make test-oldest: the unit tests that can break on it, the doctests and strict nbval, run as `make test` runs them, with the oldest PyTorch the course
# supports (pyproject.toml's "torch>=X", the one place it is written) and the torchvision made for it, on the CPU.
# They go from PyPI (its Linux wheels are CUDA builds, which run on a CPU) into a venv of its own, build/venv-oldest
# (OLDEST_VENV=... for another), made again from nothing when the install recipe, pyproject.toml, constraints.txt
# or the Python changes, else reused. PYTHON=... picks the Python (one that torch X has wheels for).
# Exits non-zero on any failure.
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-python3}
VENV=${OLDEST_VENV:-build/venv-oldest}
STAMP=$VENV/.asynclab-oldest
PY=$VENV/bin/python
# As the Makefile's PYTEST, PARALLEL and NBVAL.
PYTEST=("$PY" -m pytest -p no:cacheprovider)
PARALLEL=(-n 2 --dist loadfile)
NBVAL=(--nbval --nbval-current-env --nbval-sanitize-with tests/sanitize.cfg --nbval-cell-timeout=300 -p tests.conftest)
# The tests that can break on an older PyTorch: every test file that imports torch (the simulated GPU, the
# checkers and their answer corpus, the experiments, timing, the hardware report), the profiler's live traces
# (record) and the trace loader, and the lessons' set-up. The rest cannot differ: they read traces and write
# pictures without torch, or check the book, the workflows and the classroom's nbgrader flow, whose notebooks and
# fresh-process grades run here anyway (nbval below, and the corpus). tests/test_oldest.py checks the list.
OLDEST_TESTS=(tests/grading/test_answers.py tests/grading/test_backend.py tests/grading/test_exercises.py tests/course/test_experiments.py tests/course/test_cells.py
              tests/gpu/test_hardware.py tests/course/test_launch.py tests/course/test_lessons.py tests/test_oldest.py
              tests/gpu/test_parallel.py tests/gpu/test_record.py tests/course/test_reference.py tests/sim/test_simcuda.py
              tests/sim/test_simdevice.py tests/sim/test_simulate.py tests/sim/test_heldout.py tests/sim/test_sharing.py tests/sim/test_hostmem.py tests/gpu/test_timing.py
              tests/trace/test_trace.py tests/course/test_predicted.py)

# The oldest supported torch: the X of "torch>=X" in pyproject.toml's [project] dependencies.
oldest_torch() {
    sed -nE 's/^[[:space:]]*"torch>=([0-9]+(\.[0-9]+)*)".*/\1/p' pyproject.toml
}

# The venv: torch==X, the torchvision pip resolves for it, the course, its tests and the classroom's grading (which
# runs the notebooks) at constraints.txt's versions (less the lines of torch, torchvision and the CUDA packages they
# bring), then d2l on its own (see the Makefile's setup). The site extra is left out: the book runs no torch.
install_venv() {
    local torch=$1
    rm -rf "$VENV"
    "$PYTHON" -m venv "$VENV"
    grep -vE '^(torch|torchvision|triton)==|^(nvidia|cuda)-' constraints.txt > "$VENV/constraints-oldest.txt"
    "$PY" -m pip install --disable-pip-version-check -q -c "$VENV/constraints-oldest.txt" \
        "torch==$torch" torchvision -e ".[course,test,classroom]"
    "$PY" -m pip install --disable-pip-version-check -q --no-deps d2l==1.0.3
}

torch=$(oldest_torch)
if [[ -z $torch ]]; then
    echo 'test-oldest: pyproject.toml has no "torch>=X" dependency to read the oldest PyTorch from' >&2
    exit 1
fi
start=$(date +%s)
recipe=$({ declare -f install_venv; cat pyproject.toml constraints.txt; } | sha256sum | cut -d' ' -f1)
key="torch==$torch python$("$PYTHON" -c 'import sys; print(sys.version.split()[0])') $recipe"
if [[ ! -x $PY || ! -f $STAMP || $(cat "$STAMP") != "$key" ]]; then
    echo "test-oldest: making $VENV with torch==$torch (PyPI)"
    install_venv "$torch"
    printf '%s\n' "$key" > "$STAMP"
fi

versions=$("$PY" -c 'import torch, torchvision; print(torch.__version__, torchvision.__version__)')
read -r have_torch have_vision <<< "$versions"
if ! "$PY" -c 'import sys; from packaging.version import Version as V; sys.exit(V(V(sys.argv[1]).public) != V(sys.argv[2]))' \
        "$have_torch" "$torch"; then
    echo "test-oldest: $VENV has torch $have_torch, not torch==$torch" >&2
    exit 1
fi
echo "test-oldest: testing with torch $have_torch, torchvision $have_vision (CPU)"
"${PYTEST[@]}" "${PARALLEL[@]}" "${OLDEST_TESTS[@]}"
"${PYTEST[@]}" --doctest-modules src/asynclab
"${PYTEST[@]}" "${PARALLEL[@]}" "${NBVAL[@]}" notebooks
echo "test-oldest: passed with torch $have_torch, torchvision $have_vision in $(( $(date +%s) - start )) s"
