#!/bin/bash
# speed, run 2: main (1148475, "base") against this branch ("new") on the same files, one run.
# (main archived into build/speed/base, this branch into build/speed/new: ignored folders of the checkout that travels, carried)
export PYTHONUNBUFFERED=1
cd build/speed/new
nproc; python3 -c "import torch, numpy, h5py; print(torch.__version__, numpy.__version__, h5py.__version__)"
T="--trees base=../base,new=. --dir /tmp/b --variants library,cuda"
echo "== compare 1 GB: benchmarks/compare_throughput.py --sizes 1 --cache cold,warm --repeats 2 $T"
timeout 150 python3 benchmarks/compare_throughput.py --sizes 1 --cache cold,warm --repeats 2 $T 2>&1 | tee $OUT/compare1.txt
echo "== threads warm 4 GB (new)"; timeout 60 python3 benchmarks/compare_threads.py --gb 4 --cache warm --dir /tmp/b --top 16 2>&1 | tee $OUT/threads4.txt
echo "== compare 8 GB: benchmarks/compare_throughput.py --sizes 8 --cache cold,warm --repeats 1 $T"
timeout 220 python3 benchmarks/compare_throughput.py --sizes 8 --cache cold,warm --repeats 1 $T 2>&1 | tee $OUT/compare8.txt
