#!/bin/bash
# fitcost (issue 11, "compare's speed does not regress"): compare at 1 and 8 GB per dump, cold,
# before (d74476a: no explanations) / main / fitcost in one run, then the explanations' fits alone on
# a 1 GB pair, main against fitcost, interleaved. Run from a folder holding the three trees
# (git archive of each) as before/, main/, fitcost/.
set -o pipefail
export PYTHONUNBUFFERED=1
for t in before main fitcost; do
  python3 -m pip install -q --no-deps --no-build-isolation --target /tmp/ap_$t ./$t >/dev/null 2>&1 || { echo "install $t failed"; exit 1; }
done
cd fitcost
nproc; python3 -c "import torch, numpy, h5py; print(torch.__version__, numpy.__version__, h5py.__version__)"; df -h /tmp | tail -1
T="--variants library --cache cold --dir /tmp --trees before=/tmp/ap_before,main=/tmp/ap_main,fitcost=/tmp/ap_fitcost"
echo "python3 benchmarks/compare_throughput.py --sizes 1 --repeats 3 $T"
timeout 100 python3 benchmarks/compare_throughput.py --sizes 1 --repeats 3 $T 2>&1 | tee $OUT/compare1.txt
F="--gb 1 --rounds 5 --dir /tmp --trees main=/tmp/ap_main,fitcost=/tmp/ap_fitcost"
echo "python3 benchmarks/explain_fits.py $F"
timeout 60 python3 benchmarks/explain_fits.py $F 2>&1 | tee $OUT/fits.txt
echo "python3 benchmarks/compare_throughput.py --sizes 8 --repeats 1 $T"
timeout 130 python3 benchmarks/compare_throughput.py --sizes 8 --repeats 1 $T 2>&1 | tee $OUT/compare8.txt
