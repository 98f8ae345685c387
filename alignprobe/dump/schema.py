"""What a dump claims: the records stored beside the numbers (see docs/dump-format.md).

Everything is said in HF-index terms (docs/layer-ids.md): for a model of N decoder layers,
HF[0] is the embedding output, HF[k] the input of layer k, HF[N] the output of the final norm.
Claims are what the capturer believed; the comparer measures them and never trusts them.
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import sys
from typing import Any

from alignprobe.version import __version__

FORMAT_NAME = "alignprobe.dump"
FORMAT_VERSION = 2  # the newest version this reader reads
# What a dump is written as: 1, unless some sample carries a mark (dump/marks.py: version 2)
BASE_FORMAT_VERSION = 1

# What HF[N] means inside one stream: the real HF[N] (after the final norm), or the output of
# the last decoder layer before that norm (what vLLM and speculators call "the last hidden state").
FINAL_NORM_POST = "post"
FINAL_NORM_PRE = "pre"
FINAL_NORMS = (FINAL_NORM_POST, FINAL_NORM_PRE)

# What a stream is for. The comparer pairs streams of the same role across two dumps.
ROLE_DRAFTER_INPUT = "drafter_input"  # what the drafter's fc consumes: the aux concat (EAGLE-3)
ROLE_FINAL = "final"  # the last hidden state (EAGLE-1/2 input, EAGLE-3 target-side state)
ROLE_LAYERS = "layers"  # a stack of many HF indices, for investigation and mapping search
ROLES = (ROLE_DRAFTER_INPUT, ROLE_FINAL, ROLE_LAYERS)

DTYPES = ("bfloat16", "float16", "float32")

# The most decoder layers a claim may name. The deepest released transformers have under 200 (Llama 3.1
# 405B: 126; DeepSeek-V3 and Kimi-K2: 61); a layer count from a damaged file or a typo beyond this
# made code that walks 0..N (capture vllm's all-layers test, compare's coverage) allocate until the
# machine ran out of memory.
MAX_NUM_LAYERS = 1024


@dataclasses.dataclass(frozen=True)
class StreamClaim:
    """One named stream of states, ``[tokens, width]``: ``len(hf_indices)`` slices of ``hidden_size``.

    Slice ``j`` (columns ``j*hidden_size`` to ``(j+1)*hidden_size``) claims to be ``HF[hf_indices[j]]``.
    """

    hf_indices: tuple[int, ...]
    hidden_size: int
    num_layers: int  # N, the model's decoder layer count: HF[num_layers] is the final state
    dtype: str = "bfloat16"  # as captured
    final_norm: str = FINAL_NORM_POST
    role: str = ROLE_DRAFTER_INPUT
    note: str = ""  # free text: how the capturer arrived at the claim (e.g. "SGLang ids [1,29,57] +1")

    def __post_init__(self) -> None:
        object.__setattr__(self, "hf_indices", tuple(int(i) for i in self.hf_indices))
        if not self.hf_indices:
            raise ValueError("a stream claims at least one HF index")
        if self.hidden_size <= 0 or self.num_layers <= 0:
            raise ValueError("hidden_size and num_layers must be positive")
        if self.num_layers > MAX_NUM_LAYERS:
            raise ValueError(f"num_layers {self.num_layers} is more decoder layers than any model has "
                             f"(at most {MAX_NUM_LAYERS}); give the target model's num_hidden_layers")
        bad = [i for i in self.hf_indices if not 0 <= i <= self.num_layers]
        if bad:
            raise ValueError(f"HF indices {bad} are outside 0..{self.num_layers}")
        if self.dtype not in DTYPES:
            raise ValueError(f"dtype {self.dtype!r} is not one of {DTYPES}")
        if self.final_norm not in FINAL_NORMS:
            raise ValueError(f"final_norm {self.final_norm!r} is not one of {FINAL_NORMS}")
        if self.role not in ROLES:
            raise ValueError(f"role {self.role!r} is not one of {ROLES}")

    @property
    def width(self) -> int:
        return self.hidden_size * len(self.hf_indices)

    def slice_label(self, j: int) -> str:
        """A human name for slice j, e.g. ``HF[30]`` or ``HF[61] pre-norm``."""
        return hf_label(self.hf_indices[j], self.num_layers, self.final_norm)


def hf_label(hf_index: int, num_layers: int, final_norm: str = FINAL_NORM_POST) -> str:
    if hf_index == num_layers and final_norm == FINAL_NORM_PRE:
        return f"HF[{hf_index}] pre-norm"
    return f"HF[{hf_index}]"


@dataclasses.dataclass
class Provenance:
    """Where a dump came from. Every field is optional: a foreign dump may know little."""

    engine: str = ""  # "transformers", "sglang", "vllm", "specforge", "speculators", ...
    engine_version: str = ""
    model: str = ""  # path or hub name
    model_revision: str = ""
    dtype: str = ""  # the dtype the model ran in
    quantization: str = ""  # "" for none; "int4-w4a16-g128", "fp8", ...
    capture: dict[str, Any] = dataclasses.field(default_factory=dict)  # probe settings
    command_line: str = ""
    created_at: str = ""
    tool_version: str = ""
    extra: dict[str, Any] = dataclasses.field(default_factory=dict)

    @classmethod
    def here(cls, **fields: Any) -> "Provenance":
        """A provenance stamped with this process's command line, the time and our version."""
        fields.setdefault("command_line", " ".join(sys.argv))
        fields.setdefault("created_at", datetime.datetime.now(datetime.timezone.utc).isoformat())
        fields.setdefault("tool_version", f"alignprobe {__version__}")
        return cls(**fields)

    @classmethod
    def for_capture(cls, capture: dict[str, Any], given: "Provenance | dict | None" = None, **fields: Any) -> "Provenance":
        """A probe's provenance: what it measured (``fields``, ``capture`` settings) under what the caller
        said (``given``, a Provenance or a dict): the caller's non-empty fields win, capture dicts merge."""
        capture = dict(capture)
        if isinstance(given, Provenance):
            given = {k: v for k, v in dataclasses.asdict(given).items() if v}
        if given:
            given = dict(given)
            capture.update(given.pop("capture", {}) or {})
            fields.update(given)
        return cls.here(capture=capture, **fields)

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str, where: str = "provenance") -> tuple["Provenance", list[str]]:
        """Parse, keeping unknown keys in ``extra``; returns the notes of what was filled in.
        Text that is not a JSON object of the right field types is one BadInput line naming ``where``."""
        from alignprobe.errors import BadInput
        from alignprobe.safe_json import loads_json

        raw = loads_json(text, where)
        if not isinstance(raw, dict):
            raise BadInput(f"{where}: not a JSON object")
        for f in dataclasses.fields(cls):
            wanted = dict if f.name in ("capture", "extra") else str
            if f.name in raw and not isinstance(raw[f.name], wanted):
                raise BadInput(f"{where}: {f.name} must be a {'JSON object' if wanted is dict else 'string'}, "
                               f"got {type(raw[f.name]).__name__}")
        names = {f.name for f in dataclasses.fields(cls)}
        known = {k: v for k, v in raw.items() if k in names}
        unknown = {k: v for k, v in raw.items() if k not in names}
        if unknown:
            known.setdefault("extra", {}).update(unknown)
        missing = sorted(names - set(raw))
        notes = [f"provenance lacks {', '.join(missing)}: left empty"] if missing else []
        return cls(**known), notes
