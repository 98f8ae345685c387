"""The CPU kernels' per-pair cost: one block's (train, serve) slice pair, bf16 bits, measured whole
(``row_terms`` of the widened block: the kernels before tiling) and in tiles (``tiled_row_terms``
at several TILE_BYTES), on one core; prints ms a pair and the ratio to the whole-block baseline.

    python benchmarks/compare_tiles.py --rows 146 --hidden 7168
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from alignprobe.compare.kernels import numpy_kernels as K  # noqa: E402
from alignprobe.dump.encoding import ENCODING_BF16_BITS, from_storage  # noqa: E402


def _bits(x: np.ndarray) -> np.ndarray:
    return (x.view(np.uint32) >> 16).astype(np.uint16)


def _ms(call, repeats: int) -> float:
    call()
    t0 = time.perf_counter()
    for _ in range(repeats):
        call()
    return (time.perf_counter() - t0) / repeats * 1e3


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rows", type=int, default=146, help="rows of a block (146: a 32 MB block at H = 7168)")
    p.add_argument("--hidden", type=int, default=7168)
    p.add_argument("--repeats", type=int, default=50)
    args = p.parse_args()
    rng = np.random.default_rng(0)
    a = rng.standard_normal((args.rows, 3 * args.hidden), dtype=np.float32)
    b = a + np.float32(0.05) * rng.standard_normal(a.shape, dtype=np.float32)
    # one slice of a 3H-wide stream, as the pass slices it: rows strided by the stream's width
    raw_a, raw_b = _bits(a)[:, args.hidden : 2 * args.hidden], _bits(b)[:, args.hidden : 2 * args.hidden]
    whole = _ms(lambda: K.row_terms(from_storage(raw_a, ENCODING_BF16_BITS), from_storage(raw_b, ENCODING_BF16_BITS)),
                args.repeats)
    print(f"{args.rows} rows x H={args.hidden}, bf16, one core")
    print(f"{'kernel':28s} {'ms a pair':>9s} {'vs whole':>9s}")
    print(f"{'whole block (row_terms)':28s} {whole:9.2f} {1.0:8.2f}x")
    stored_a, stored_b = K.Stored(raw_a, ENCODING_BF16_BITS), K.Stored(raw_b, ENCODING_BF16_BITS)
    default = K.TILE_BYTES
    for tile in (128 << 10, 256 << 10, 512 << 10, 1 << 20, 2 << 20):
        K.TILE_BYTES = tile
        ms = _ms(lambda: K.tiled_row_terms(stored_a, stored_b), args.repeats)
        mark = " (default)" if tile == default else ""
        print(f"{f'tiles of {tile >> 10} KB{mark}':28s} {ms:9.2f} {whole / ms:8.2f}x")
    K.TILE_BYTES = default


if __name__ == "__main__":
    main()
