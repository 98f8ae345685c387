"""explain/duplicate_tap.py: one serve slice repeats another to the last bit (a layer captured twice,
an expected one never); slices merely alike are no duplicate."""

import numpy as np

from alignprobe.compare.explain import explain_slice
from alignprobe.compare.explain.base import ExplainRows
from explain_rows import H


def test_a_slice_written_twice_is_a_repeated_id_even_where_neighbouring_layers_agree():
    # train HF[1..3] where HF[3] is within the tolerance of HF[2] (a trained model's deep layers); the
    # serve side wrote HF[2] twice: slice 1 is identity, slice 2 the repeat (not an offset to HF[2])
    rng = np.random.default_rng(3)
    length, samples = 40, 5
    sample = np.repeat(np.arange(samples), length)
    position = np.tile(np.arange(length), samples)
    h1 = rng.standard_normal((len(sample), H)).astype(np.float32)
    h2 = rng.standard_normal((len(sample), H)).astype(np.float32)
    h3 = (h2 + 0.04 * rng.standard_normal(h2.shape)).astype(np.float32)  # rel-RMS 0.04 from HF[2]
    train = {(1, "post"): h1, (2, "post"): h2, (3, "post"): h3}
    serve = np.stack([h1, h2, h2], axis=1)
    rows = ExplainRows(serve=serve, train=train, sample=sample, position=position,
                       sample_ids=[f"s{i}" for i in range(samples)], fit=((position // 8) + sample) % 2 == 0,
                       expected=[(1, "post"), (2, "post"), (3, "post")], claimed=[1, 2, 3], num_layers=4,
                       tolerance=0.07, drift_tolerance=0.2, position_growth=3.0, train_provenance={},
                       serve_provenance={})
    assert [explain_slice(rows, j, "x").winner.name for j in range(3)] == ["identity", "identity", "duplicate_tap"]
    # ... and where training holds one layer twice too (EAGLE-3's ids for 6 layers: HF[2, 3, 3]), a copy is no fault
    rows.expected, rows.claimed = [(1, "post"), (2, "post"), (2, "post")], [1, 2, 2]
    assert [explain_slice(rows, j, "x").winner.name for j in range(3)] == ["identity"] * 3
