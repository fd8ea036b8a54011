#!/usr/bin/env bash
# GPU check: run the unit tests and strict nbval with the GPU live, on a machine that has Python
# and torch but no package registry. The rest comes from a folder of wheels.
#
#   scripts/gpu_check.sh [--wheels DIR] [--memory-cap-gib N] [--only unit|notebooks] [--refresh NOTEBOOK ...]
#
#   --wheels DIR   wheels to install (default .whl): nbval, ipykernel, nbclient, d2l and their needs
#   --memory-cap-gib N  cap every process's memory on each GPU at N GiB (notebook kernels and torchrun's
#                  children too, through scripts/memcap/sitecustomize.py), to prove the lessons fit a small GPU
#   --only PART    run one half: `unit` (unit tests, doctests, the answer corpus on the GPU) or `notebooks`
#                  (refresh, then strict nbval), for a runner that limits how long one job may take; `refresh`:
#                  only the refresh (and --record)
#   --refresh NB   first re-execute these notebooks in place (keeps execution counts), so their
#                  stored outputs come from this GPU; then nbval checks them like every other notebook
#   --record       while refreshing, record each experiment cell (run.measure with the cell's own code) into its
#                  lesson's reference: cells.json and cell_<name>.json.gz (asynclab.course.cells)
#   --record-stale the same, for the cells with no recording or one made from other code than the cell's
set -uo pipefail
cd "$(dirname "$0")/.."
wheels=.whl
refresh=()
only=all
export_record=0
while [ $# -gt 0 ]; do
  case "$1" in
    --wheels) wheels=$2; shift 2 ;;
    --memory-cap-gib) export ASYNCLAB_GPU_MEMORY_GIB=$2; cap=1; shift 2 ;;
    --only) only=$2; shift 2
      case "$only" in unit|notebooks|refresh) ;; *) echo "gpu_check: --only takes unit, notebooks or refresh, not $only" >&2; exit 2 ;; esac ;;
    --record) export_record=1; shift ;;
    --record-stale) export_record=stale; shift ;;
    --refresh) shift; while [ $# -gt 0 ] && [ "${1#--}" = "$1" ]; do refresh+=("$1"); shift; done ;;
    *) echo "gpu_check: unknown argument $1" >&2; exit 2 ;;
  esac
done
site=${TMPDIR:-/tmp}/asynclab-site
if ls "$wheels"/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$site" "$wheels"/*.whl || exit 1
fi
export PYTHONPATH="$site:$PWD/src${PYTHONPATH:+:$PYTHONPATH}"
if [ -n "${cap:-}" ]; then
  export PYTHONPATH="$PWD/scripts/memcap:$PYTHONPATH"
  echo "gpu_check: every process capped at $ASYNCLAB_GPU_MEMORY_GIB GiB per GPU"
fi
unset MPLBACKEND  # notebooks use the inline backend, so their stored outputs keep the figures
python3 -m asynclab.cli hardware || exit 1
status=0
if [ "$only" != notebooks ] && [ "$only" != refresh ]; then
  echo "== unit tests =="
  python3 -m pytest -p no:cacheprovider -q tests || status=1
  python3 -m pytest -p no:cacheprovider -q --doctest-modules src/asynclab || status=1
fi
[ "$only" = unit ] && { echo "gpu_check (unit): $([ $status = 0 ] && echo PASSED || echo FAILED)"; exit $status; }
[ "$only" = refresh ] && [ ${#refresh[@]} -eq 0 ] && { echo "gpu_check: --only refresh needs --refresh NOTEBOOK ..." >&2; exit 2; }
if [ ${#refresh[@]} -gt 0 ]; then
  echo "== refreshing stored outputs: ${refresh[*]} =="
  if [ $export_record != 0 ]; then echo "   recording the experiment cells (ASYNCLAB_RECORD=$export_record)"; fi
  ASYNCLAB_RECORD=$export_record python3 -m asynclab.cli course --in-place --figures figures "${refresh[@]}" || status=1
fi
[ "$only" = refresh ] && { echo "gpu_check (refresh): $([ $status = 0 ] && echo PASSED || echo FAILED)"; exit $status; }
echo "== strict nbval, GPU live =="
python3 -m pytest -p no:cacheprovider -q --nbval --nbval-current-env --nbval-sanitize-with tests/sanitize.cfg \
  --nbval-cell-timeout=300 -p tests.conftest notebooks || status=1
echo "gpu_check: $([ $status = 0 ] && echo PASSED || echo FAILED)"
exit $status
