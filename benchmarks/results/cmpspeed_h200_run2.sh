#!/bin/bash
# cmpspeed, run 2: main (9789c16, "base", in build/cs/base) against this branch ("new") after run 1's
# lessons (mapping rows copied, 2 MB tiles), same files, one run; then the branch's switches.
export PYTHONUNBUFFERED=1
nproc; python3 -c "import torch, numpy, h5py, sys; print(sys.version.split()[0], torch.__version__, numpy.__version__, h5py.__version__)"
T="--trees base=build/cs/base,new=. --dir /tmp/b"
echo "== compare 1 GB: compare_throughput.py --sizes 1 --cache cold,warm --repeats 2 $T --variants library,cuda"
timeout 150 python3 benchmarks/compare_throughput.py --sizes 1 --cache cold,warm --repeats 2 $T --variants library,cuda 2>&1 | tee $OUT/compare1.txt
V=library,lib_nosplit,lib_6sets,lib_tile512k,lib_nopipe,cuda_gpu
echo "== switches, 1 GB warm (new): --variants $V"
timeout 100 python3 benchmarks/compare_throughput.py --sizes 1 --cache warm --repeats 2 --dir /tmp/b --variants $V 2>&1 | tee $OUT/tune1.txt
echo "== threads, 1 GB warm (new)"; timeout 40 python3 benchmarks/compare_threads.py --gb 1 --cache warm --dir /tmp/b --top 16 2>&1 | tee $OUT/threads1.txt
echo "== compare 8 GB: compare_throughput.py --sizes 8 --cache cold,warm --repeats 1 $T --variants library,lib_nosplit,lib_6sets"
timeout 200 python3 benchmarks/compare_throughput.py --sizes 8 --cache cold,warm --repeats 1 $T --variants library,lib_nosplit,lib_6sets 2>&1 | tee $OUT/compare8.txt
