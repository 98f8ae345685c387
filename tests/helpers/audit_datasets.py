"""Tiny training sets of many files, in each real layout, with any data fault planted in chosen samples.

The states are seeded random rows with a per-slice scale (the audit reads data, not a model): H=32,
three aux slices plus a final state. Tokens follow a chat template: a fixed header, the prompt, a
fixed assistant header, then the response, which alone is in the loss mask.
"""

from __future__ import annotations

import os

import numpy as np
import torch
from safetensors.torch import save_file

from alignprobe.dump import DumpWriter, Provenance, StreamClaim
from importer_folders import save_specforge_record

H = 32
N = 8
HEADER = [101, 102, 103, 104]
ASSISTANT = [105, 106]
THINK = [107, 108, 109]  # an empty think block some samples open their response with
FAULTS = ("nan", "zero", "constant", "norm", "repeat", "padding", "rows", "duplicate", "template", "nomask")


def make_samples(count=24, seed=0, faults: dict[str, list[int]] | None = None):
    """``count`` samples as dicts (tokens, loss_mask, aux [S, 3, H], final [S, H], pad); ``faults`` maps a
    fault name to the samples it is planted in ("template": those samples get the think block)."""
    faults = faults or {}
    g = np.random.default_rng(seed)
    samples = []
    for i in range(count):
        prompt = g.integers(200, 900, g.integers(3, 9)).tolist()
        response = g.integers(200, 900, g.integers(4, 12)).tolist()
        if i in faults.get("template", []):
            response = THINK + response
        tokens = HEADER + prompt + ASSISTANT + response
        mask = [0] * (len(tokens) - len(response)) + [1] * len(response)
        if i in faults.get("duplicate", []):
            tokens, mask = samples[0]["tokens"], samples[0]["loss_mask"]
        s = len(tokens)
        aux = (g.standard_normal((s, 3, H)) * np.array([1.0, 4.0, 9.0])[None, :, None]).astype(np.float32)
        final = g.standard_normal((s, H)).astype(np.float32)
        mask = plant_state_faults(i, aux, mask, faults)
        pad = 0
        if i in faults.get("padding", []):
            pad = 3
            tokens, mask = tokens + [0] * pad, mask + [0] * pad
            aux = np.concatenate([aux, g.standard_normal((pad, 3, H)).astype(np.float32)])
            final = np.concatenate([final, g.standard_normal((pad, H)).astype(np.float32)])
        if i in faults.get("rows", []):
            aux, final = aux[:-2], final[:-2]
        samples.append({"tokens": tokens, "loss_mask": mask, "aux": aux, "final": final, "pad": pad})
    return samples


def plant_state_faults(i, aux, mask, faults):
    """The faults of sample ``i`` that live in its states (planted in ``aux`` in place) or its mask (returned)."""
    if i in faults.get("nan", []):
        aux[2, 1, 5] = np.nan
    if i in faults.get("zero", []):
        aux[1:4, 0] = 0
    if i in faults.get("constant", []):
        aux[2:4, 2] = 0.25
    if i in faults.get("norm", []):
        aux[:, 1] *= 100
    if i in faults.get("repeat", []):
        aux[:, 2] = aux[:, 1]
    if i in faults.get("nomask", []):
        mask = [0] * len(mask)
    return mask


SINK_SCALE = 5.0  # the large token's embedding, times this: its state ~4.5x the median at every tap
SHARED_PREFIX = 6  # tokens the prefix samples share with sample 0


def trained_model_samples(count=40, faults=None, prefix_samples=(30, 31, 32, 33, 34), seed=5):
    """``count`` samples of a briefly trained tiny Llama's own states (H=32, 4 layers: layers 1-3 as the
    aux slices, the final norm's output as the final state), in make_samples' form, with the state and
    duplicate faults planted. Like a trained model with a massive activation, one token (the third of
    sample 0) carries a state several times the median norm wherever it sits, the same in every sample
    that shares its context: its embedding is made large. ``prefix_samples`` open with sample 0's
    first SHARED_PREFIX tokens, so they hold that token at the same position, with the same state.
    Returns (samples, the large token)."""
    from alignprobe.demo.tiny_models import synthetic_corpus

    faults = faults or {}
    model = _trained_llama()
    corpus = synthetic_corpus(count, 40, seed=seed, vocab=model.config.vocab_size)
    sink = int(corpus[0, 2])
    g = np.random.default_rng(seed)
    samples = []
    with torch.no_grad():
        embedding = model.model.embed_tokens.weight
        kept = embedding[sink].clone()
        embedding[sink] *= SINK_SCALE
        try:
            for i in range(count):
                tokens = corpus[i, : int(g.integers(16, 40))].clone()
                if i in prefix_samples:
                    tokens[:SHARED_PREFIX] = corpus[0, :SHARED_PREFIX]
                if i in faults.get("duplicate", []):
                    tokens = torch.tensor(samples[0]["tokens"])
                states = model(input_ids=tokens[None], output_hidden_states=True).hidden_states
                aux = torch.stack([states[layer][0] for layer in (1, 2, 3)], 1).numpy().copy()
                mask = [0] * 4 + [1] * (len(tokens) - 4)
                mask = plant_state_faults(i, aux, mask, faults)
                samples.append({"tokens": tokens.tolist(), "loss_mask": mask, "aux": aux,
                                "final": states[-1][0].numpy().copy(), "pad": 0})
        finally:
            embedding[sink] = kept
    return samples, sink


_TRAINED = {}


def _trained_llama():
    """The seeded tiny Llama, trained once a process (half a minute on one busy core)."""
    if "llama" not in _TRAINED:
        from alignprobe.demo.tiny_models import tiny_llama, train_briefly

        _TRAINED["llama"] = train_briefly(tiny_llama(num_layers=4, hidden_size=H, seed=0), steps=30, batch=8, length=32)
    return _TRAINED["llama"]


def write_specforge(root, samples, gz_every=4):
    for idx, s in enumerate(samples):
        record = {"input_ids": torch.tensor(s["tokens"]), "loss_mask": torch.tensor(s["loss_mask"]),
                  "aux_hidden_state": torch.from_numpy(s["aux"].reshape(len(s["aux"]), -1)).unsqueeze(0),
                  "hidden_state": torch.from_numpy(s["final"]).unsqueeze(0)}
        save_specforge_record(root, idx, record, gz_every)
    return str(root)


def write_speculators(root, samples):
    os.makedirs(root, exist_ok=True)
    for idx, s in enumerate(samples):
        states = np.concatenate([s["aux"], s["final"][:, None, :]], axis=1)
        save_file({"hidden_states": torch.from_numpy(np.ascontiguousarray(states)), "token_ids": torch.tensor(s["tokens"])},
                  os.path.join(root, f"hs_{idx}.safetensors"))
    return str(root)


def write_dump(path, samples):
    """An alignprobe dump (no loss mask, no padding, no rows/tokens mismatch: the format forbids them)."""
    streams = {"aux": StreamClaim((2, 4, 5), H, N, "float32"), "final": StreamClaim((N,), H, N, "float32", role="final")}
    with DumpWriter(path, Provenance.here(engine="test"), streams, shard_tokens=64) as writer:
        for idx, s in enumerate(samples):
            if s["pad"] or len(s["aux"]) != len(s["tokens"]):
                continue
            writer.add(f"s{idx}", np.asarray(s["tokens"]), {"aux": s["aux"].reshape(len(s["aux"]), -1), "final": s["final"]})
    return str(path)


def write_speculators_prepared(root, samples):
    """speculators prepare-data + offline generation as 0.9 lays them out: the dataset (``save_to_disk``:
    Arrow stream ``data-00000-of-00001.arrow``, ``state.json``) with ``input_ids``, ``loss_mask`` and
    ``seq_len``, and ``hidden_states/hs_{row}.safetensors``. A sample planted with padding keeps its
    real ids in the dataset while its states file holds the pad rows too."""
    import json

    import pyarrow as pa

    ids, masks = [], []
    for s in samples:
        real = len(s["tokens"]) - s["pad"]
        ids.append([int(t) for t in s["tokens"][:real]])
        masks.append([int(m) for m in s["loss_mask"][:real]])
    table = pa.table({"input_ids": pa.array(ids, type=pa.list_(pa.int64())),
                      "loss_mask": pa.array(masks, type=pa.list_(pa.int64())),
                      "seq_len": pa.array([len(i) for i in ids], type=pa.int64())})
    os.makedirs(root, exist_ok=True)
    with pa.OSFile(os.path.join(root, "data-00000-of-00001.arrow"), "wb") as sink:
        with pa.ipc.new_stream(sink, table.schema) as writer:
            for batch in table.to_batches(max_chunksize=16):  # several record batches, as datasets writes
                writer.write_batch(batch)
    with open(os.path.join(root, "state.json"), "w") as fh:
        json.dump({"_data_files": [{"filename": "data-00000-of-00001.arrow"}], "_fingerprint": "test"}, fh)
    return write_speculators(os.path.join(root, "hidden_states"), samples)


def recorded_read_ahead(monkeypatch) -> tuple[list[list], list[str]]:
    """(the paths each ReadAhead was made with, every path read_through read, in order): the audit's
    read-ahead watched, its reads still done."""
    from alignprobe.audit import readahead

    made: list[list] = []
    read: list[str] = []
    real_init, real_read = readahead.ReadAhead.__init__, readahead.read_through
    monkeypatch.setattr(readahead.ReadAhead, "__init__", lambda self, paths: (made.append(list(paths)), real_init(self, paths))[1])
    monkeypatch.setattr(readahead, "read_through", lambda path, buffer: (read.append(path), real_read(path, buffer))[1])
    return made, read
