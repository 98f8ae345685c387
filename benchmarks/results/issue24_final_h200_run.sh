#!/bin/bash
# Issue 24, fifth session: the table re-measured on main's final code, on the H200 host.
#   PART=compare: compare at 1, 3 and 8 GB a dump, cold and warm, best of 2; library (the size's choice:
#                 numpy below FUSED_MIN_VALUES, the compiled kernels above), lib_numpy (numpy at any size)
#                 and cuda (--device cuda: on 16 cores the choice runs it on the CPU and says so)
#   PART=dask:       the audit on N Dask workers against N raw readers (4 GB SpecForge folder, cold), with
#                 the wheels of dask and its needs carried in .whl/ (the image has no dask)
# PART="compare dask" runs both. Run from the repository root with OUT set:  OUT=dir PART=compare bash benchmarks/results/issue24_final_h200_run.sh
set -o pipefail
export PYTHONUNBUFFERED=1
: "${OUT:?set OUT to an output folder}"
mkdir -p "$OUT" /tmp/bench
[ -e alignprobe/probes ] || ln -s ../probes alignprobe/probes
{ date -u +%FT%TZ; nproc; free -g | head -2; df -h /tmp | tail -1
  python3 -c "import numba, numpy, h5py; print('numba', numba.__version__, 'numpy', numpy.__version__, 'h5py', h5py.__version__)"
} | tee "$OUT/env.txt"
for part in ${PART:-compare}; do
case "$part" in
compare)
  timeout "${CLIMIT:-480}" python3 benchmarks/compare_throughput.py --sizes "${SIZES:-1,8,3}" --cache cold,warm \
    --variants "${VARIANTS:-library,lib_numpy,cuda}" --repeats 2 --dir /tmp/bench 2>&1 | tee -a "$OUT/compare.txt" ;;
dask)
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl \
    && export PYTHONPATH=/tmp/site || exit 1
  python3 -c "import dask, distributed; print('dask', dask.__version__, 'distributed', distributed.__version__)" | tee -a "$OUT/env.txt" || exit 1
  F=$(timeout 120 python3 benchmarks/audit_throughput.py --gb 4 --hidden 7168 --tokens 1024 --write-only --dir /tmp/bench | sed 's/.*: //')
  echo "== folder $F" | tee "$OUT/dask.txt"
  timeout "${DLIMIT:-420}" python3 benchmarks/audit_throughput.py --folder "$F" --hidden 7168 --workers "${WORKERS:-2,8,16,1}" \
    --rounds "${ROUNDS:-1}" --skip import,compare,raw16,audit1 --torch-threads 1 2>&1 | grep -v '^{' | tee -a "$OUT/dask.txt" ;;
esac
done
