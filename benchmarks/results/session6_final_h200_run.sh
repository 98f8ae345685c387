#!/bin/bash
# Session 6 final: compare at 1 GB (before explanations / session start / final, and the final's
# ablations: no rows explained, 8 MB blocks), then 8 GB (before / start / final), cold cache.
set -o pipefail
export PYTHONUNBUFFERED=1
for t in before start final; do python3 -m pip install -q --no-deps --no-build-isolation --target /tmp/ap_$t ./$t >/dev/null 2>&1 || { echo "install $t failed"; exit 1; }; done
cd final
nproc; python3 -c "import torch, numpy, h5py; print(torch.__version__, numpy.__version__, h5py.__version__)"; df -h /tmp | tail -1
T="--cache cold --dir /tmp"
echo "python3 benchmarks/compare_throughput.py --sizes 1 --repeats 4 --variants library $T --trees before,start,final"
timeout 120 python3 benchmarks/compare_throughput.py --sizes 1 --repeats 4 --variants library $T --trees before=/tmp/ap_before,start=/tmp/ap_start,final=/tmp/ap_final 2>&1 | tee $OUT/compare1.txt
echo "python3 benchmarks/compare_throughput.py --sizes 1 --repeats 4 --variants library,lib_noexp,lib_8mb $T --trees final"
timeout 100 python3 benchmarks/compare_throughput.py --sizes 1 --repeats 4 --variants library,lib_noexp,lib_8mb $T --trees final=/tmp/ap_final 2>&1 | tee $OUT/ablate1.txt
echo "python3 benchmarks/compare_throughput.py --sizes 8 --repeats 1 --variants library $T --trees before,start,final"
timeout 200 python3 benchmarks/compare_throughput.py --sizes 8 --repeats 1 --variants library $T --trees before=/tmp/ap_before,start=/tmp/ap_start,final=/tmp/ap_final 2>&1 | tee $OUT/compare8.txt
