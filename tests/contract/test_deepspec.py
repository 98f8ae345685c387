"""Bad DeepSpec target caches: each is one line, exit 2, the folder untouched (import, audit)."""

from __future__ import annotations

import json
import os

import pytest

from bad_input_helpers import assert_refused
from tests.importers.test_deepspec import write_target_cache


def _manifest(folder, **change):
    path = os.path.join(folder, "manifest.json")
    manifest = json.load(open(path))
    manifest.update(change)
    json.dump(manifest, open(path, "w"))


FAULTS = {
    "version": lambda f: _manifest(f, version=3),
    "dtype": lambda f: _manifest(f, hidden_dtype="float16"),
    "count": lambda f: _manifest(f, num_samples=99),
    "no-field": lambda f: (lambda m: json.dump({k: v for k, v in m.items() if k != "hidden_size"},
                                               open(os.path.join(f, "manifest.json"), "w")))(
        json.load(open(os.path.join(f, "manifest.json")))),
    "not-json": lambda f: open(os.path.join(f, "manifest.json"), "w").write("{"),
    "index-cut": lambda f: os.truncate(os.path.join(f, "samples.idx"), 50),
    "no-index": lambda f: os.remove(os.path.join(f, "samples.idx")),
    "shard-cut": lambda f: os.truncate(os.path.join(f, "shard-00001.bin"), 64),
    "shard-gone": lambda f: os.remove(os.path.join(f, "shard-00001.bin")),
}


@pytest.mark.slow
@pytest.mark.parametrize("fault", sorted(FAULTS))
def test_a_bad_cache_is_one_line(tmp_path, fault):
    folder = write_target_cache(str(tmp_path / "cache"))
    FAULTS[fault](folder)
    out = tmp_path / "out.h5"
    assert_refused(["import", folder, "--quiet", "--num-layers", "8", "--out", str(out)], [folder])
    assert not os.path.exists(out)
