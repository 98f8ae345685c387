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
    nan_rows: int
    inf_rows: int
    zero_rows: int


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
        for s in self.streams:
            bad = ", ".join(f"{n} {k} rows" for k, n in (("NaN", s.nan_rows), ("Inf", s.inf_rows), ("all-zero", s.zero_rows)) if n)
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
        )


def _summarise_stream(dump: Dump, name: str) -> StreamSummary:
    claim = dump.streams[name]
    k, h = len(claim.hf_indices), claim.hidden_size
    norm_sum, slice_norm_sum = 0.0, np.zeros(k)
    nan_rows = inf_rows = zero_rows = finite_rows = 0
    step = dump.block_tokens(name)
    for start in range(0, dump.num_tokens, step):
        x = dump.read(name, start, min(dump.num_tokens, start + step))
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
    )
