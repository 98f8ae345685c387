#!/bin/bash
# Issue 24, branch daskscale: the audit on N Dask workers against N raw readers of the same files, N = 1, 2,
# 4, 8, 16, main and this branch in the same run on the same files, cold (evicted before every row), two
# interleaved rounds, the best of each row in a ratio table. Goal: "of raw N" >= 0.90 for every N.
#
# Run from the repository root (this branch checked out) with OUT set to an output folder:
#     OUT=/some/dir bash benchmarks/results/daskscale_h200_run.sh
# Wall time: ~5-7 minutes on the H200 host (16 cores); the benchmark itself is cut at 420 s, and every
# row is in $OUT/audit_throughput.txt as soon as it is measured. Exit 2: no OUT, no dask/distributed,
# or no main tree to compare against.
set -o pipefail
export PYTHONUNBUFFERED=1
: "${OUT:?set OUT to an output folder}"
mkdir -p "$OUT"
BASE_REF=${BASE_REF:-main}
GB=${GB:-4.5}
ROUNDS=${ROUNDS:-2}
WORKERS=${WORKERS:-1,2,4,8,16}
PY=${PYTHON:-python3}
started=$(date +%s)

# The dask extra is named "dask" in setup.cfg. The host may have no index: then install without resolving
# (torch, numpy, h5py, dask must be there already); the benchmark imports each tree from its source anyway.
$PY -m pip install -q -e '.[dask]' >/dev/null 2>&1 \
  || $PY -m pip install -q --no-deps --no-build-isolation -e . >/dev/null 2>&1 \
  || echo "pip install -e . failed: using the source trees only" | tee -a "$OUT/env.txt"
$PY -c "import distributed, torch, h5py, numpy" 2>/dev/null \
  || { echo "dask.distributed (or torch/h5py/numpy) is not importable: pip install 'dask[distributed]>=2024.1'"; exit 2; }

# main's tree beside this one (its alignprobe package; the branch's benchmark script measures both)
git worktree remove --force /tmp/base >/dev/null 2>&1; rm -rf /tmp/base
if ! git worktree add --detach /tmp/base "$BASE_REF" >/dev/null 2>&1; then
  mkdir -p /tmp/base && git archive "$BASE_REF" | tar -x -C /tmp/base \
    || { echo "no $BASE_REF to compare against (git worktree add /tmp/base $BASE_REF failed)"; exit 2; }
fi

{ echo "# daskscale H200 run, $(date -u +%FT%TZ)"; echo "branch $(git rev-parse --short HEAD), base $BASE_REF $(git rev-parse --short "$BASE_REF" 2>/dev/null)"
  nproc; free -g | head -2; df -h /tmp | tail -1; lsblk -d -o NAME,ROTA,SIZE,MODEL 2>/dev/null
  $PY -c "import torch, numpy, h5py, dask, distributed; print('torch', torch.__version__, 'numpy', numpy.__version__, 'h5py', h5py.__version__, 'dask', dask.__version__, 'distributed', distributed.__version__)"
} | tee -a "$OUT/env.txt"

mkdir -p /tmp/bench
F=$($PY benchmarks/audit_throughput.py --gb "$GB" --hidden 7168 --tokens 1024 --write-only --dir /tmp/bench | tee -a "$OUT/env.txt" | sed 's/.*: //')
[ -d "$F" ] || { echo "writing the folder failed"; exit 2; }
sync; (echo 3 > /proc/sys/vm/drop_caches) 2>/dev/null || echo "(no drop_caches: fadvise eviction before each row only)" | tee -a "$OUT/env.txt"

timeout 420 $PY benchmarks/audit_throughput.py --folder "$F" --hidden 7168 --workers "$WORKERS" --rounds "$ROUNDS" \
  --skip import,compare,raw16,audit1 --torch-threads 1 --trees main=/tmp/base,branch="$PWD" 2>&1 | tee "$OUT/audit_throughput.txt"
rc=$?
# the table after the last round measured (one is printed after every round: a cut run keeps its last)
tac "$OUT/audit_throughput.txt" | sed -n '1,/^best of the rounds/p' | tac | grep -v '^{' | tee "$OUT/ratio_table.txt"
rm -rf /tmp/bench
echo "wall $(( $(date +%s) - started )) s, benchmark exit $rc" | tee -a "$OUT/env.txt"
exit $rc
