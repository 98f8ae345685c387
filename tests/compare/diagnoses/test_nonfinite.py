"""compare/diagnoses/nonfinite.py: NaN / Inf rows on either side, counted per slice, an error."""

import numpy as np

from alignprobe.compare import compare
from compare_helpers import make_samples, write_serve, write_train


def test_nan_and_inf_serve_rows_are_counted_per_slice(tmp_path):
    samples = make_samples(num=4, length=30)

    def poisoned(x, sid):
        if sid == "s01":
            x[3, 0], x[7, -1] = np.nan, np.inf  # a row of the first slice, a row of the last
        return x

    train = write_train(tmp_path / "t.h5", samples)
    f = compare(train, write_serve(tmp_path / "s.h5", samples, transform=poisoned)).finding("nonfinite")
    assert f.severity == "error"
    by_label = {s["label"]: s for s in f.evidence["slices"]}
    assert by_label["HF[2]"]["serve_nan_rows"] == 1 and by_label["HF[4]"]["serve_inf_rows"] == 1
    assert all(s["train_nan_rows"] == 0 for s in f.evidence["slices"])
