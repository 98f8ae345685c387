#!/bin/bash
# The device run of benchmarks/compare_limits.py (session 6): main's tree, a 2.5 GB SpecForge folder
set -o pipefail
export PYTHONUNBUFFERED=1

python3 -m pip install -q --no-deps --no-build-isolation --target /tmp/apM . >/dev/null 2>&1 || { echo "install failed"; exit 1; }
mkdir -p /tmp/bench
F=$(python3 benchmarks/audit_throughput.py --gb 2.5 --hidden 7168 --tokens 1024 --write-only --dir /tmp/bench | tee $OUT/env.txt | sed 's/.*: //')
PYTHONSAFEPATH=1 PYTHONPATH=/tmp/apM python3 -c "
from alignprobe.importers import import_source
import_source('$F', '/tmp/bench/d.h5', layer_ids=[1, 3, 4], num_layers=8, overwrite=True, progress=False)"
cp /tmp/bench/d.h5 /tmp/bench/c.h5; sync; echo 3 > /proc/sys/vm/drop_caches
nproc >> $OUT/env.txt; python3 -c "import numpy, torch; print(numpy.__version__, torch.__version__, torch.get_num_threads())" >> $OUT/env.txt
R="main:foreign:cold:;main:dumps:cold:;main:foreign:warm:;main:dumps:warm:"
R="$R;main:foreign:warm:noexplain;main:foreign:warm:nomap;main:foreign:warm:noexplain,nomap;main:foreign:warm:nowarm;main:foreign:warm:torch1"
R="$R;main:foreign:warm:bb=32;main:foreign:warm:noexplain,nomap,bb=32"
R="$R;main:dumps:warm:noexplain;main:dumps:warm:nomap;main:dumps:warm:noexplain,nomap;main:dumps:warm:bb=32;main:dumps:warm:noexplain,nomap,bb=32"
python3 benchmarks/compare_limits.py --folder "$F" --dump /tmp/bench/d.h5 --copy /tmp/bench/c.h5 --tree main=/tmp/apM --rows "$R" 2>&1 | tee $OUT/limits.txt
