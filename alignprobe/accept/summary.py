"""The terminal summary of an AcceptResult: one table, the findings, the sentence."""

from __future__ import annotations

from alignprobe.accept.result import AcceptResult
from alignprobe.findings import render


def format_accept(result: AcceptResult) -> str:
    lines = [f"drafter {result.drafter} ({result.layout} layout), chains of {result.num_draft_tokens} drafts"]
    sides = [(name, side) for name, side in (("train", result.train), ("serve", result.serve)) if side is not None]
    if sides:
        k = result.num_draft_tokens
        header = "  side    AL    " + "  ".join(f"pos{j + 1:<3}" for j in range(k)) + "  drafts  fed"
        lines += ["", header]
        for name, side in sides:
            lines.append(f"  {name:<6}{side.accept_length:5.2f}   " + "  ".join(f"{p:6.3f}" for p in side.per_position)
                         + f"  {side.drafts:6d}  {side.stream} HF{side.hf_indices}: {side.fed}")
            if side.sampled_accept_length is not None:
                lines.append(f"  {'':<6}{side.sampled_accept_length:5.2f}   "
                             + "  ".join(f"{p:6.3f}" for p in side.sampled_per_position)
                             + f"  expected at temperature {side.temperature:g}")
        lines.append("  (pos j: share of the engine's drafts whose tokens 1..j are all accepted, walking each sample as the "
                     "engine does; AL = 1 + their sum)")
    if result.findings:
        lines.append("")
        for f in result.findings:
            lines.append(f"  {f.severity:<5} {f.code}: {render.title(f)}")
            fix = render.fix(f)
            if fix:
                lines.append(f"        fix: {fix}")
    lines += ["", result.sentence()]
    lines += [f"note: {n}" for n in result.notes]
    return "\n".join(lines)

