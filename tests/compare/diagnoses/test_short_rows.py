"""compare/diagnoses/short_rows.py: samples the engine returned fewer rows for than it had tokens (a
prefix cache's hits, marked at capture), named with the rows returned."""

import numpy as np

from alignprobe.compare import compare
from alignprobe.dump import DumpWriter, Provenance
from alignprobe.dump.marks import SampleMark
from compare_helpers import AUX, aux_claim, make_samples, write_train


def test_a_sample_returned_in_part_is_named_with_the_rows_returned(tmp_path):
    samples = make_samples(num=3, length=20)
    train = write_train(tmp_path / "t.h5", samples)
    serve = str(tmp_path / "s.h5")
    with DumpWriter(serve, Provenance.here(engine="sglang", dtype="float32"), {"hidden_states": aux_claim()}) as w:
        for i, (sid, (ids, hf, _prenorm)) in enumerate(samples.items()):
            x = hf[:, list(AUX)].reshape(len(hf), -1).copy()
            mark = None
            if i == 1:  # the first 8 rows came from the prefix cache: never returned, NaN placeholders
                x[:8] = np.nan
                mark = SampleMark(len(ids), (8, len(ids)))
            w.add(sid, ids, {"hidden_states": x}, mark=mark)
    r = compare(train, serve)
    f = r.finding("short_rows")
    assert f.evidence["short_samples"] == 1 and f.evidence["rows_not_returned"] == 8
    assert f.evidence["samples"] == [{"sample_id": list(samples)[1], "rows_returned": 12, "tokens": 20,
                                      "positions_returned": "8-19"}]
    assert r.finding("nonfinite") is None  # the placeholders are not the engine's NaN
