"""What a person needs to see of one dump at a glance (``alignprobe inspect``)."""

from __future__ import annotations

import dataclasses
import os

import numpy as np

from alignprobe.dump import Dump, Provenance, open_dump


@dataclasses.dataclass
class StreamSummary:
    name: str
    role: str
    width: int
    hidden_size: int
    dtype: str
    hf_indices: list[int]
    slice_labels: list[str]
    final_norm: str
    note: str
    mean_norm: float  # mean L2 norm of a token's full row
    mean_slice_norms: list[float]  # the same, per hidden-size slice (per claimed HF index)
    nan_rows: int  # placeholders of short samples not counted: they are placeholder_rows
    inf_rows: int
    zero_rows: int
    placeholder_rows: int = 0  # NaN rows standing where a short sample's engine returned nothing (marks)


@dataclasses.dataclass
class DumpSummary:
    path: str
    format_version: int
    provenance: Provenance
    num_samples: int
    num_tokens: int
    min_length: int
    max_length: int
    streams: list[StreamSummary]
    notes: list[str]
    # samples kept as the engine returned them (dump/marks.py): counts and the first MARKED_SHOWN
    marked: dict = dataclasses.field(default_factory=dict)

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    def format(self) -> str:
        """A terminal rendering that fits a screen."""
        p = self.provenance
        lines = [
            f"{self.path}  (alignprobe dump v{self.format_version})",
            f"  engine     {p.engine or '?'} {p.engine_version}".rstrip(),
            f"  model      {p.model or '?'}" + (f" @ {p.model_revision}" if p.model_revision else ""),
            f"  dtype      {p.dtype or '?'}   quantization {p.quantization or 'none'}",
            f"  created    {p.created_at or '?'} by {p.tool_version or '?'}",
        ]
        if p.command_line:
            lines.append(f"  command    {p.command_line}")
        lines.append(
            f"  samples    {self.num_samples}, {self.num_tokens} tokens (length {self.min_length}..{self.max_length})"
        )
        if self.marked:
            m = self.marked
            shown = "; ".join(
                f"{e['sample_id']} " + ", ".join(
                    ([f"rows {e['positions_returned']} of {e['tokens']} returned"] if e["rows_returned"] != e["tokens"] else [])
                    + ([f"{e['nonfinite_rows']} NaN/Inf rows"] if e["nonfinite_rows"] else []))
                for e in m["samples"])
            more = f"; +{m['samples_marked'] - len(m['samples'])} more" if m["samples_marked"] > len(m["samples"]) else ""
            lines.append(f"  marked     {m['samples_marked']} samples kept as the engine returned them "
                         f"({m['nonfinite_samples']} with NaN/Inf rows, {m['short_samples']} short): {shown}{more}")
        for s in self.streams:
            bad = ", ".join(f"{n} {k} rows" for k, n in (("NaN", s.nan_rows), ("Inf", s.inf_rows), ("all-zero", s.zero_rows),
                                                        ("NaN placeholder", s.placeholder_rows)) if n)
            lines += [
                f"  stream {s.name!r} ({s.role}): width {s.width} = {len(s.hf_indices)} x {s.hidden_size}, {s.dtype}",
                f"      claims {', '.join(s.slice_labels)}" + (f"  ({s.note})" if s.note else ""),
                f"      mean row norm {s.mean_norm:.4g}; per slice "
                + ", ".join(f"{v:.4g}" for v in s.mean_slice_norms)
                + (f"; {bad}" if bad else ""),
            ]
        lines += [f"  note: {n}" for n in self.notes]
        return "\n".join(lines)


def inspect_dump(path: str | os.PathLike) -> DumpSummary:
    """Summarise a dump, reading it once in bounded memory."""
    with open_dump(path) as dump:
        lengths = np.diff(dump.offsets)
        return DumpSummary(
            path=dump.path,
            format_version=dump.version,
            provenance=dump.provenance,
            num_samples=dump.num_samples,
            num_tokens=dump.num_tokens,
            min_length=int(lengths.min()) if len(lengths) else 0,
            max_length=int(lengths.max()) if len(lengths) else 0,
            streams=[_summarise_stream(dump, name) for name in dump.streams],
            notes=list(dump.notes),
            marked=_marked(dump),
        )


MARKED_SHOWN = 20


def _marked(dump: Dump) -> dict:
    marks = dump.marks
    if marks is None or not len(marks.marked_indices()):
        return {}
    marked = marks.marked_indices()
    samples = []
    for i in marked[:MARKED_SHOWN]:
        m = marks.mark(int(i))
        samples.append({"sample_id": dump.sample_ids[int(i)], "tokens": m.length, "rows_returned": m.rows_returned,
                        "positions_returned": f"{m.returned[0]}-{m.returned[1] - 1}" if m.rows_returned else "none",
                        "nonfinite_rows": m.nonfinite_rows})
    return {"samples_marked": len(marked), "nonfinite_samples": int((marks.nonfinite > 0).sum()),
            "short_samples": len(marks.short_indices()),
            "placeholder_rows": int((marks.lengths - (marks.returned[:, 1] - marks.returned[:, 0])).sum()),
            "samples": samples}


def _placeholder_spans(dump: Dump) -> np.ndarray:
    """Flat row ranges ``[k, 2]`` that hold placeholders (rows a short sample's engine did not return)."""
    if dump.marks is None:
        return np.zeros((0, 2), dtype=np.int64)
    spans = []
    for i in dump.marks.short_indices():
        start, (first, last) = int(dump.offsets[i]), dump.marks.returned[i]
        spans += [(start, start + int(first)), (start + int(last), int(dump.offsets[i + 1]))]
    return np.array([s for s in spans if s[1] > s[0]], dtype=np.int64).reshape(-1, 2)


def _summarise_stream(dump: Dump, name: str) -> StreamSummary:
    claim = dump.streams[name]
    k, h = len(claim.hf_indices), claim.hidden_size
    norm_sum, slice_norm_sum = 0.0, np.zeros(k)
    nan_rows = inf_rows = zero_rows = finite_rows = placeholder_rows = 0
    spans = _placeholder_spans(dump)
    step = dump.block_tokens(name)
    for start in range(0, dump.num_tokens, step):
        stop = min(dump.num_tokens, start + step)
        x = dump.read(name, start, stop)
        if len(spans):  # a short sample's placeholders are not states: counted apart, left out
            placeholder = np.zeros(len(x), bool)
            for a, b in spans[(spans[:, 1] > start) & (spans[:, 0] < stop)]:
                placeholder[max(a, start) - start : min(b, stop) - start] = True
            placeholder_rows += int(placeholder.sum())
            x = x[~placeholder]
        nan = np.isnan(x).any(axis=1)
        inf = np.isinf(x).any(axis=1)
        finite = ~(nan | inf)
        nan_rows += int(nan.sum())
        inf_rows += int(inf.sum())
        zero_rows += int((~x.any(axis=1)).sum())
        finite_rows += int(finite.sum())
        xf = x[finite].astype(np.float64)
        norm_sum += float(np.linalg.norm(xf, axis=1).sum())
        slice_norm_sum += np.linalg.norm(xf.reshape(len(xf), k, h), axis=2).sum(axis=0)
    finite_rows = max(1, finite_rows)
    return StreamSummary(
        name=name,
        role=claim.role,
        width=claim.width,
        hidden_size=h,
        dtype=claim.dtype,
        hf_indices=list(claim.hf_indices),
        slice_labels=[claim.slice_label(j) for j in range(k)],
        final_norm=claim.final_norm,
        note=claim.note,
        mean_norm=norm_sum / finite_rows,
        mean_slice_norms=[float(v) / finite_rows for v in slice_norm_sum],
        nan_rows=nan_rows,
        inf_rows=inf_rows,
        zero_rows=zero_rows,
        placeholder_rows=placeholder_rows,
    )
