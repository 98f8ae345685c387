#!/bin/bash
# main against the branch folderpace (blocks that grow with the threads), cold and warm, a folder as
# train side and two dumps, in one run (benchmarks/compare_limits.py). Run from a tree of the branch
# with main's tree as main.tar beside it: git -C /work/main archive main > main.tar
set -o pipefail
export PYTHONUNBUFFERED=1
mkdir -p /tmp/m && tar -x -C /tmp/m -f main.tar
python3 -m pip install -q --no-deps --no-build-isolation --target /tmp/apM /tmp/m >/dev/null 2>&1 || { echo "install main failed"; exit 1; }
python3 -m pip install -q --no-deps --no-build-isolation --target /tmp/apB . >/dev/null 2>&1 || { echo "install branch failed"; exit 1; }
mkdir -p /tmp/bench
F=$(python3 benchmarks/audit_throughput.py --gb ${GB:-2.5} --hidden 7168 --tokens 1024 --write-only --dir /tmp/bench | tee $OUT/env.txt | sed 's/.*: //')
PYTHONSAFEPATH=1 PYTHONPATH=/tmp/apB python3 -c "
from alignprobe.importers import import_source
import_source('$F', '/tmp/bench/d.h5', layer_ids=[1, 3, 4], num_layers=8, overwrite=True, progress=False)"
cp /tmp/bench/d.h5 /tmp/bench/c.h5; sync; [ -w /proc/sys/vm/drop_caches ] && echo 3 > /proc/sys/vm/drop_caches
R=""
for cache in cold warm; do for side in foreign dumps; do for tree in main branch; do R="$R;$tree:$side:$cache:"; done; done; done
python3 benchmarks/compare_limits.py --folder "$F" --dump /tmp/bench/d.h5 --copy /tmp/bench/c.h5 --tree main=/tmp/apM \
  --tree branch=/tmp/apB --rows "${R#;}" 2>&1 | tee $OUT/blocks.txt
