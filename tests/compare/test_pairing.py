"""Sample pairing and token alignment, on hand-made token lists and small dumps."""

import numpy as np
import pytest

from alignprobe.compare import compare
from alignprobe.compare.pairing import align_tokens, pair_samples
from alignprobe.dump import open_dump
from compare_helpers import AUX, aux_claim, make_samples, write_dump, write_serve, write_train

T = np.arange(100, 130)


@pytest.mark.parametrize(
    "serve, kind, t_off, s_off, length, extra",
    [
        (T, "identical", 0, 0, 30, {}),
        (T[2:], "shift", 2, 0, 28, {"shift": 2}),
        (np.concatenate([[1], T]), "shift", 0, 1, 30, {"shift": -1}),
        (np.concatenate([T[:5], [7, 8], T[7:]]), "divergent", 0, 0, 5, {"first_divergence": 5}),
        (np.concatenate([T, [0, 0, 0]]), "padding", 0, 0, 30, {"padded_side": "serve"}),
        (T[:20], "padding", 0, 0, 20, {"padded_side": "train"}),
        (T + 1000, "divergent", 0, 0, 0, {"first_divergence": 0}),
    ],
)
def test_align_tokens(serve, kind, t_off, s_off, length, extra):
    al = align_tokens(T, serve)
    assert (al.kind, al.train_offset, al.serve_offset, al.length) == (kind, t_off, s_off, length)
    for key, value in extra.items():
        assert getattr(al, key) == value
    if length:  # the aligned rows really hold equal tokens
        np.testing.assert_array_equal(T[t_off : t_off + length], np.asarray(serve)[s_off : s_off + length])


def test_a_few_coincidental_tokens_are_not_a_shift():
    serve = np.concatenate([T[3:8], np.arange(900, 925)])
    assert align_tokens(T, serve).kind == "divergent"


@pytest.fixture(scope="module")
def samples():
    return make_samples(num=8, length=24)


@pytest.fixture(scope="module")
def train(tmp_path_factory, samples):
    return write_train(tmp_path_factory.mktemp("tok") / "train.h5", samples)


def test_unpaired_samples_are_counted_and_named(tmp_path, samples, train):
    serve = write_serve(tmp_path / "serve.h5", {**samples, "extra": samples["s00"]}, skip=("s01", "s02"))
    r = compare(train, serve)
    f = r.finding("sample_mismatch")
    assert (f.evidence["paired"], f.evidence["train_only"], f.evidence["serve_only"]) == (6, 2, 1)
    assert f.evidence["train_only_examples"] == ["s01", "s02"] and f.severity == "warn"
    assert r.tokens.aligned_tokens == 6 * 24


def test_no_common_sample_fails(tmp_path, samples, train):
    """Other ids and other tokens: nothing pairs either way (same tokens would pair by them, below)."""
    renamed = {f"other-{k}": v for k, v in make_samples(num=8, length=24, seed=5).items()}
    r = compare(train, write_serve(tmp_path / "serve.h5", renamed))
    assert r.verdict == "FAIL" and r.finding("sample_mismatch").severity == "error"
    assert r.streams[0].slices[0].tokens == 0


class _Tokenizer:
    def decode(self, ids):
        return "|".join(f"t{i}" for i in ids)


def test_divergent_tokens_are_shown_and_only_the_prefix_is_compared(tmp_path, samples, train):
    def ids_fn(ids, sid):
        ids = ids.copy()
        if sid == "s03":
            ids[10] = 999
        return ids

    serve = write_serve(tmp_path / "serve.h5", samples, ids_fn=ids_fn)
    r = compare(train, serve, tokenizer=_Tokenizer())
    f = r.finding("token_mismatch")
    ex = f.evidence["examples"][0]
    assert (ex["sample_id"], ex["first_divergence"], ex["serve_token"]) == ("s03", 10, 999)
    assert ex["train_token"] == int(samples["s03"][0][10])
    assert "t999" in ex["serve_text"] and ex["train_text"].startswith("t")
    assert r.tokens.aligned_tokens == 7 * 24 + 10
    assert r.streams[0].slices[0].tokens == 7 * 24 + 10


def test_nothing_aligned_is_an_error(tmp_path, samples, train):
    serve = write_serve(tmp_path / "serve.h5", samples, ids_fn=lambda ids, sid: ids + 10000)
    r = compare(train, serve)
    assert r.finding("no_aligned_tokens").severity == "error" and r.verdict == "FAIL"
    # a width difference is still reported, unmeasured
    narrow = write_serve(tmp_path / "narrow.h5", samples, taps=(6,), ids_fn=lambda ids, sid: ids + 10000)
    f = compare(train, narrow).finding("width_mismatch")
    assert f.evidence["serve_width"] * 3 == f.evidence["expected_width"] and "no aligned rows" in f.title


def test_sample_and_max_tokens_bound_the_work(tmp_path, samples, train):
    serve = write_serve(tmp_path / "serve.h5", samples)
    with open_dump(train) as t, open_dump(serve) as s:
        check, segments = pair_samples(t, s, sample=3)
        assert check.compared_samples == 3 and check.paired == 8
        assert [seg.sample_id for seg in segments] == ["s00", "s04", "s07"]  # evenly spread, ends included
        check, segments = pair_samples(t, s, max_tokens=50)
        assert sum(seg.length for seg in segments) == 50 == check.aligned_tokens
    r = compare(train, serve, max_tokens=50)
    assert r.streams[0].slices[0].tokens == 50 and r.options["max_tokens"] == 50


def test_many_token_issues_are_all_counted_but_few_kept(tmp_path, monkeypatch):
    import alignprobe.compare.pairing as pairing

    monkeypatch.setattr(pairing, "MAX_ISSUES", 3)
    samples = make_samples(num=8, length=24)
    train = write_train(tmp_path / "t.h5", samples)
    from compare_helpers import AUX, aux_claim, write_dump

    serve = write_dump(
        tmp_path / "s.h5", samples, {"hidden_states": aux_claim()},
        lambda hf, pre, sid: {"hidden_states": hf[1:, list(AUX)].reshape(len(hf) - 1, -1)},
        ids_fn=lambda ids, sid: ids[1:],
    )
    r = compare(train, serve)
    assert len(r.tokens.issues) == 3 and r.tokens.issue_counts == {"shift": 8} and r.tokens.shift_counts == {"1": 8}
    assert r.finding("token_shift").evidence["samples"] == 8


def _divergent_pair(tmp_path, provenance=None):
    from alignprobe.dump import Provenance

    samples = make_samples(num=3, length=16)
    samples = {k: (ids % 200, hf, pre) for k, (ids, hf, pre) in samples.items()}  # byte tokens: printable text
    prov = Provenance(**(provenance or {}))
    train = write_train(tmp_path / "t.h5", samples, provenance=prov)

    def ids_fn(ids, sid):
        ids = ids.copy()
        if sid == "s01":
            ids[6] = ord("Z")
        return ids

    return train, write_serve(tmp_path / "s.h5", samples, ids_fn=ids_fn, provenance=prov), samples


def test_the_tokenizer_of_a_local_model_folder_decodes_divergent_tokens(tmp_path):
    from alignprobe.demo.tiny_tokenizer import tiny_tokenizer

    folder = tmp_path / "model"
    tiny_tokenizer().save_pretrained(folder)
    train, serve, samples = _divergent_pair(tmp_path, {"model": str(folder)})
    ex = compare(train, serve).finding("token_mismatch").evidence["examples"][0]  # tokenizer="auto"
    assert ex["first_divergence"] == 6 and "Z" in ex["serve_text"]
    expected = bytes(int(i) for i in samples["s01"][0][3:10]).decode("latin-1")
    assert ex["train_text"] and all(c in expected for c in ex["train_text"] if c.isascii() and c.isprintable())
    assert compare(train, serve, tokenizer=None).finding("token_mismatch").evidence["examples"][0]["serve_text"] == ""


def test_an_explicit_tokenizer_that_cannot_load_is_bad_input(tmp_path):
    from alignprobe.errors import BadInput

    train, serve, _ = _divergent_pair(tmp_path)
    with pytest.raises(BadInput, match="cannot load a tokenizer"):
        compare(train, serve, tokenizer=str(tmp_path / "no-such-folder"))


# -- pairing by tokens where the two sides name samples differently ---------------------------------


def test_samples_named_differently_pair_by_their_tokens(tmp_path, samples, train):
    """An imported folder names a sample by its tokens' hash, a capture by its prompt's id: the ids pair
    nothing though every token sequence agrees one to one (reversed here, so order cannot pair them)."""
    renamed = {f"tok-{k}": v for k, v in reversed(list(samples.items()))}
    r = compare(train, write_serve(tmp_path / "serve.h5", renamed))
    assert r.tokens.paired_by == "tokens" and r.tokens.paired == 8 and r.tokens.identical == 8
    assert r.verdict == "PASS" and not [f for f in r.findings if f.severity != "info"]
    assert r.tokens.aligned_tokens == 8 * 24
    assert any("paired by their token sequences" in n for n in r.notes)


def test_pairing_by_tokens_takes_the_right_partner_not_the_same_place(tmp_path, samples, train):
    """Reversed order: each train sample's rows are compared with the serve sample of its tokens, so the
    states agree exactly; a pairing by place would compare other samples' states."""
    renamed = {f"tok-{k}": v for k, v in reversed(list(samples.items()))}
    with open_dump(train) as t, open_dump(write_serve(tmp_path / "serve.h5", renamed)) as s:
        check, segments = pair_samples(t, s)
        assert {seg.sample_id: seg.serve_id for seg in segments} == {k: f"tok-{k}" for k in samples}
        for seg in segments:
            np.testing.assert_array_equal(t.token_ids(t.index_of(seg.sample_id)), s.token_ids(s.index_of(seg.serve_id)))


def test_padding_on_one_side_still_pairs_by_tokens(tmp_path, samples, train):
    """SpecForge rows carry the batch's right padding: the same tokens plus a tail of one pad id."""
    padded = {f"tok-{k}": v for k, v in samples.items()}
    serve = write_serve(tmp_path / "serve.h5", padded)
    pad = write_dump(tmp_path / "padded.h5", {k: (np.concatenate([ids, [0, 0, 0]]), np.concatenate([hf, hf[:3]]),
                                                   np.concatenate([pre, pre[:3]])) for k, (ids, hf, pre) in padded.items()},
                     {"hidden_states": aux_claim()}, lambda hf, pre, sid: {"hidden_states": hf[:, list(AUX)].reshape(len(hf), -1)})
    for other in (serve, pad):
        r = compare(train, other)
        assert r.tokens.paired_by == "tokens" and r.tokens.paired == 8 and r.verdict == "PASS", r.findings
    assert compare(train, pad).tokens.issue_counts == {"padding": 8}


def test_ids_that_pair_keep_pairing_by_id(tmp_path, samples, train):
    """Same ids, one sample's tokens divergent: tokens would pair no more agreeing samples, so the ids
    pair all eight and the divergent one is named."""
    def ids_fn(ids, sid):
        ids = ids.copy()
        if sid == "s02":
            ids[5] = 999
        return ids

    r = compare(train, write_serve(tmp_path / "serve.h5", samples, ids_fn=ids_fn))
    assert r.tokens.paired_by == "id" and r.tokens.paired == 8 and r.finding("token_mismatch")


def test_a_wrong_prompt_file_is_not_rescued_by_tokens(tmp_path, samples, train):
    """No token sequence agrees: the ids still pair, and the divergence is named."""
    r = compare(train, write_serve(tmp_path / "serve.h5", samples, ids_fn=lambda ids, sid: ids + 10000))
    assert r.tokens.paired_by == "id" and r.finding("no_aligned_tokens")


def test_a_few_token_pairs_with_the_rest_unpaired(tmp_path, samples, train):
    """Half the serve samples renamed, half of another prompt set: the renamed ones pair by tokens and
    sample_mismatch counts the others, naming the pairing."""
    other = make_samples(num=4, length=24, seed=7)
    mixed = {**{f"tok-{k}": v for k, v in list(samples.items())[:4]}, **{f"x{k}": v for k, v in other.items()}}
    r = compare(train, write_serve(tmp_path / "serve.h5", mixed))
    f = r.finding("sample_mismatch")
    assert r.tokens.paired_by == "tokens" and (f.evidence["paired"], f.evidence["train_only"], f.evidence["serve_only"]) == (4, 4, 4)
    assert f.evidence["paired_by"] == "tokens" and "paired by token sequence" in f.title


def test_repeated_sequences_pair_in_order(tmp_path):
    base = make_samples(num=2, length=16)
    ids, hf, pre = base["s00"]
    twice = {"a": (ids, hf, pre), "b": (ids, hf * 2, pre * 2)}
    train = write_train(tmp_path / "t.h5", twice)
    serve = write_serve(tmp_path / "s.h5", {"x": twice["a"], "y": twice["b"]})
    with open_dump(train) as t, open_dump(serve) as s:
        check, segments = pair_samples(t, s)
    assert check.paired_by == "tokens" and [(seg.sample_id, seg.serve_id) for seg in segments] == [("a", "x"), ("b", "y")]
