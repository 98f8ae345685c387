#!/bin/bash
# Session 7: compare at 1 GB per dump, session start (828ba69) against final, cold cache; then the
# explanations' fits alone on the same trees (interleaved rounds).
set -o pipefail
export PYTHONUNBUFFERED=1
cd .carry-s7
for t in start final; do python3 -m pip install -q --no-deps --no-build-isolation --target /tmp/ap_$t ./$t >/dev/null 2>&1 || { echo "install $t failed"; exit 1; }; done
cd final
nproc; python3 -c "import torch, numpy, h5py; print(torch.__version__, numpy.__version__, h5py.__version__)"
T="--cache cold --dir /tmp"
echo "== compare1: python3 benchmarks/compare_throughput.py --sizes 1 --repeats 4 --variants library $T --trees start,final"
timeout 150 python3 benchmarks/compare_throughput.py --sizes 1 --repeats 4 --variants library $T --trees start=/tmp/ap_start,final=/tmp/ap_final 2>&1 | tee $OUT/compare1.txt
echo "== fits: python3 benchmarks/explain_fits.py --gb 1 --rounds 5 --trees start,final"
timeout 200 python3 benchmarks/explain_fits.py --gb 1 --rounds 5 --trees start=/tmp/ap_start,final=/tmp/ap_final 2>&1 | tee $OUT/fits.txt
echo "== compare8: python3 benchmarks/compare_throughput.py --sizes 8 --repeats 1 --variants library $T --trees start,final"
timeout 200 python3 benchmarks/compare_throughput.py --sizes 8 --repeats 1 --variants library $T --trees start=/tmp/ap_start,final=/tmp/ap_final 2>&1 | tee $OUT/compare8.txt
