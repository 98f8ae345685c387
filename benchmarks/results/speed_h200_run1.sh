#!/bin/bash
# speed, run 1: main's code (= this tree's alignprobe): thread profile and baseline table.
# (the tree was copied into build/speed/new, an ignored folder of the checkout that travels, and carried)
export PYTHONUNBUFFERED=1
cd build/speed/new
nproc; python3 -c "import torch, numpy, h5py; print(torch.__version__, numpy.__version__, h5py.__version__)"
echo "== threads warm 4 GB cpu"; timeout 120 python3 benchmarks/compare_threads.py --gb 4 --cache warm --dir /tmp/b --top 45 2>&1 | tee $OUT/threads4.txt
echo "== table 1 GB"; timeout 150 python3 benchmarks/compare_throughput.py --sizes 1 --cache cold,warm --repeats 2 --variants library,lib_1t,lib_noexp,cuda --dir /tmp/b 2>&1 | tee $OUT/table1.txt
echo "== threads warm 1 GB cuda"; timeout 60 python3 benchmarks/compare_threads.py --gb 1 --cache warm --dir /tmp/b --device cuda --top 30 2>&1 | tee $OUT/threads1cuda.txt
