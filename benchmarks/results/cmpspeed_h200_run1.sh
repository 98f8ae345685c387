#!/bin/bash
# cmpspeed, run 1: main (9789c16, "base", archived into build/cs/base) against this branch ("new") on
# the same files, one run: 1 GB cold and warm, 8 GB cold and warm; then the branch's tuning and threads.
export PYTHONUNBUFFERED=1
nproc; python3 -c "import torch, numpy, h5py, sys; print(sys.version.split()[0], torch.__version__, numpy.__version__, h5py.__version__)"
echo "== kernels: benchmarks/compare_tiles.py"; python3 benchmarks/compare_tiles.py 2>&1 | tee $OUT/tiles.txt
T="--trees base=build/cs/base,new=. --dir /tmp/b --variants library,cuda"
echo "== compare 1 GB: compare_throughput.py --sizes 1 --cache cold,warm --repeats 2 $T"
timeout 150 python3 benchmarks/compare_throughput.py --sizes 1 --cache cold,warm --repeats 2 $T 2>&1 | tee $OUT/compare1.txt
V=library,lib_notile,lib_tile2m,lib_tile1m,lib_nopipe,lib_t12,lib_16mb,lib_noexp,cuda_gpu
echo "== tuning, 1 GB warm (new): --variants $V"
timeout 120 python3 benchmarks/compare_throughput.py --sizes 1 --cache warm --repeats 2 --dir /tmp/b --variants $V 2>&1 | tee $OUT/tune1.txt
echo "== threads, 1 GB warm (new)"; timeout 50 python3 benchmarks/compare_threads.py --gb 1 --cache warm --dir /tmp/b --top 24 2>&1 | tee $OUT/threads1.txt
echo "== compare 8 GB: compare_throughput.py --sizes 8 --cache cold,warm --repeats 1 $T"
timeout 230 python3 benchmarks/compare_throughput.py --sizes 8 --cache cold,warm --repeats 1 $T 2>&1 | tee $OUT/compare8.txt
