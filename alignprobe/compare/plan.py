"""Which train slice each serve slice should equal: streams paired by role.

- a serve ``drafter_input`` stream should equal the train ``drafter_input`` stream (the EAGLE-3 aux
  concat), or the train ``final`` stream when training had none (an EAGLE-1/2 drafter);
- a serve ``final`` stream should equal the train ``final`` stream;
- a serve ``layers`` stream is paired slice by slice with the train slice of the same claimed HF
  index (investigation stacks: the mapping search still measures what each slice really is).

H and N come from the train side's claims: training is the reference coordinate system.
"""

from __future__ import annotations

import dataclasses

from alignprobe.compare.mapping import candidate_key
from alignprobe.dump import ROLE_DRAFTER_INPUT, ROLE_FINAL, ROLE_LAYERS, Dump
from alignprobe.errors import BadInput

Key = tuple[int, str]


@dataclasses.dataclass
class StreamPlan:
    serve_stream: str
    role: str
    num_slices: int  # serve width / H (0 when the width is not a multiple of H)
    train_stream: str = ""  # the train stream it should equal ("" for layers: several may be used)
    # per serve slice: the train slice it should equal, or None (a layers slice training lacks)
    expected: list[tuple[str, int] | None] = dataclasses.field(default_factory=list)
    expected_keys: list[Key | None] = dataclasses.field(default_factory=list)
    expected_labels: list[str] = dataclasses.field(default_factory=list)

    @property
    def width_ok(self) -> bool:
        return self.num_slices > 0 and self.num_slices == len(self.expected)


def train_geometry(train: Dump) -> tuple[int, int]:
    """(H, N) from the train dump's claims, which must agree across its streams."""
    sizes = {c.hidden_size for c in train.streams.values()}
    layers = {c.num_layers for c in train.streams.values()}
    if len(sizes) != 1 or len(layers) != 1:
        detail = ", ".join(f"{n}: H={c.hidden_size} N={c.num_layers}" for n, c in train.streams.items())
        raise BadInput(f"{train.path}: the train dump's streams disagree on hidden size / layer count ({detail})")
    return sizes.pop(), layers.pop()


def _first(dump: Dump, role: str) -> str:
    return next((name for name, c in dump.streams.items() if c.role == role), "")


def _holding(dump: Dump, key: Key) -> str:
    """The stream holding exactly that one slice (an HF index in its norm form), or ""."""
    return next((name for name, c in dump.streams.items()
                 if len(c.hf_indices) == 1 and candidate_key(c, 0) == key), "")


def plan_streams(train: Dump, serve: Dump, hidden_size: int, notes: list[str]) -> list[StreamPlan]:
    train_index: dict[Key, tuple[str, int]] = {}
    for name, claim in train.streams.items():
        for j in range(len(claim.hf_indices)):
            train_index.setdefault(candidate_key(claim, j), (name, j))
    plans = []
    for name, claim in serve.streams.items():
        width = serve.dataset(name).shape[1]
        k = width // hidden_size if width % hidden_size == 0 else 0
        if claim.hidden_size != hidden_size:
            notes.append(
                f"serve stream {name!r} claims hidden size {claim.hidden_size}; it is sliced by the train "
                f"side's {hidden_size}"
            )
        plan = StreamPlan(name, claim.role, k)
        if claim.role in (ROLE_DRAFTER_INPUT, ROLE_FINAL):
            target = _first(train, claim.role)
            if not target and claim.role == ROLE_DRAFTER_INPUT:
                target = _first(train, ROLE_FINAL)  # EAGLE-1/2 training: the drafter consumed the final state
            if not target:
                notes.append(f"serve stream {name!r} ({claim.role}): the train dump has no stream to pair it with")
                continue
            if claim.role == ROLE_FINAL and len(claim.hf_indices) == 1:
                # pre- and post-norm finals differ by the norm: pair with the one the serve side claims
                # when the train side holds both (capture hf keeps final_prenorm beside final)
                same = _holding(train, candidate_key(claim, 0))
                target = same or target
            tclaim = train.streams[target]
            plan.train_stream = target
            plan.expected = [(target, j) for j in range(len(tclaim.hf_indices))]
            plan.expected_keys = [candidate_key(tclaim, j) for j in range(len(tclaim.hf_indices))]
            plan.expected_labels = [tclaim.slice_label(j) for j in range(len(tclaim.hf_indices))]
        elif claim.role == ROLE_LAYERS:
            if k != len(claim.hf_indices):
                notes.append(f"serve stream {name!r} (layers) is not {len(claim.hf_indices)} slices of {hidden_size}: skipped")
                continue
            for j in range(k):
                key = candidate_key(claim, j)
                plan.expected.append(train_index.get(key))
                plan.expected_keys.append(key if key in train_index else None)
                plan.expected_labels.append(claim.slice_label(j))
            missing = [plan.expected_labels[j] for j in range(k) if plan.expected[j] is None]
            if missing:
                notes.append(f"serve stream {name!r}: the train dump lacks {', '.join(missing)}; those slices are not compared")
            if all(e is None for e in plan.expected):
                continue
        plans.append(plan)
    for role in (ROLE_DRAFTER_INPUT, ROLE_FINAL):
        if _first(train, role) and not _first(serve, role):
            notes.append(f"the serve dump has no {role} stream: the train side's {_first(train, role)!r} is not checked")
    return plans


def pass_streams(plans: list[StreamPlan]) -> tuple[set[str], set[str]]:
    """(serve streams, train streams) the streaming pass reads: those of every expected pair of the
    plans whose width matches training. What it reads it can hand on (feeding.py, explaining.py)."""
    measured = [p for p in plans if p.width_ok]
    serve = {p.serve_stream for p in measured if any(e is not None for e in p.expected)}
    train = {e[0] for p in measured for e in p.expected if e is not None}
    return serve, train
