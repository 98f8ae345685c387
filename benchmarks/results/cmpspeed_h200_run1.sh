#!/bin/bash
# cmpspeed, run 1: main (9789c16, "base", archived into build/cs/base: an ignored folder, carried)
# against this branch ("new", the working tree) on the same files, one run; then the branch's tuning.
export PYTHONUNBUFFERED=1
nproc; python3 -c "import torch, numpy, h5py, sys; print(sys.version.split()[0], torch.__version__, numpy.__version__, h5py.__version__)"
echo "== kernels: benchmarks/compare_tiles.py"; python3 benchmarks/compare_tiles.py 2>&1 | tee $OUT/tiles.txt
T="--trees base=build/cs/base,new=. --dir /tmp/b --variants library,cuda"
echo "== compare 1 GB: compare_throughput.py --sizes 1 --cache cold,warm --repeats 2 $T"
timeout 150 python3 benchmarks/compare_throughput.py --sizes 1 --cache cold,warm --repeats 2 $T 2>&1 | tee $OUT/compare1.txt
echo "== tuning, 1 GB warm (new)"
timeout 120 python3 benchmarks/compare_throughput.py --sizes 1 --cache warm --repeats 2 --dir /tmp/b --variants library,lib_notile,lib_tile1m,lib_nopipe,lib_t12,lib_16mb,lib_8mb,lib_noexp 2>&1 | tee $OUT/tune1.txt
echo "== threads, 1 GB warm (new)"; timeout 60 python3 benchmarks/compare_threads.py --gb 1 --cache warm --dir /tmp/b --top 24 2>&1 | tee $OUT/threads1.txt
echo "== profile 1 GB warm (new)"; timeout 60 python3 benchmarks/compare_throughput.py --profile --sizes 1 --cache warm --dir /tmp/b 2>&1 | tee $OUT/profile1.txt
