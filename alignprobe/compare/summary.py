"""The one-screen terminal summary of a CompareResult: verdict, findings by severity, per-layer tables."""

from __future__ import annotations

import math
import textwrap

from alignprobe.compare.result import CompareResult, SliceMetrics, StreamComparison
from alignprobe.compare.sampling import Z95
from alignprobe.findings import render
from alignprobe.findings.evidence_text import evidence_value
from alignprobe.findings.jsonable import jsonable

WIDTH = 100
MAX_ROWS = 10  # slices shown per stream: the rest are summarised, the worst always shown
LABEL = {"error": "ERROR", "warn": "WARN ", "info": "info "}
# ANSI colours for a terminal that takes them (the CLI decides: a tty, and NO_COLOR unset).
_ANSI = {"PASS": "32", "WARN": "33", "FAIL": "31", "error": "31", "warn": "33", "info": "2"}


def paint(text: str, key: str, colour: bool) -> str:
    return f"\033[{_ANSI[key]}m{text}\033[0m" if colour and key in _ANSI else text


def format_verdict_line(result: CompareResult, colour: bool = False) -> str:
    """``alignprobe compare: FAIL (layer_offset, numeric_drift)``: what --quiet prints."""
    codes = result.codes("warn")
    tail = f" ({', '.join(codes)})" if codes else ""
    return f"alignprobe compare: {paint(result.verdict, result.verdict, colour)}{tail}"


def format_summary(result: CompareResult, width: int = WIDTH, *, verbose: bool = False, colour: bool = False) -> str:
    """The terminal summary; ``verbose`` lists every slice and every finding's fix, ``colour`` adds ANSI colours."""
    t = result.tokens
    lines = [
        f"alignprobe compare: {paint(result.verdict, result.verdict, colour)}",
        f"  train {result.train_path}  vs  serve {result.serve_path}",
        f"  H={result.hidden_size} N={result.num_layers}; {t.paired} samples paired{' by token sequence' if t.paired_by == 'tokens' else ''}, {t.compared_samples} compared, "
        f"{t.aligned_tokens} token rows; {result.elapsed_s:.1f} s",
    ]
    if result.findings:
        lines.append("")
    for f in result.findings:
        head = f"{LABEL[f.severity]} {f.code} {render.where(f)}".rstrip()
        wrapped = textwrap.wrap(f"{head}: {render.title(f)}", width, subsequent_indent="        ")
        wrapped[0] = paint(wrapped[0][:5], f.severity, colour) + wrapped[0][5:]
        lines += wrapped
        fix = render.fix(f)
        if (f.severity != "info" or verbose) and fix:
            lines += textwrap.wrap(f"fix: {fix}", width, initial_indent="        ", subsequent_indent="             ")
        if verbose and f.evidence:
            lines.append("        evidence:")
            for key, value in jsonable(f.evidence).items():
                lines += textwrap.wrap(f"{key.replace('_', ' ')}: {evidence_value(value)}", width,
                                       initial_indent="          ", subsequent_indent="            ")
    if not result.findings:
        lines += ["", "no findings: the serve side feeds the drafter what training used, within tolerance"]
    sampling = result.options.get("sampling")
    if sampling:
        lines += ["", *textwrap.wrap(f"sampled: {sampling}", width)]
    # Notes say what was assumed or not checked (a serve dump without a final stream, ...): a reader
    # must see them beside the verdict, not only at the bottom of the HTML.
    if result.notes:
        lines += ["", "notes:"]
        for note in result.notes:
            lines += textwrap.wrap(note, width, initial_indent="  - ", subsequent_indent="    ")
    for comparison in result.streams:
        lines += ["", *_table(result, comparison, verbose)]
    return "\n".join(lines)


def _table(result: CompareResult, c: StreamComparison, verbose: bool = False) -> list[str]:
    mapping = next((m for m in result.mappings if m.serve_stream == c.serve_stream), None)
    measured = ""
    if mapping is not None:
        pairs = list(zip(mapping.measured, mapping.expected))
        wrong = [(got, want) for got, want in pairs if got != want]
        if not wrong:
            listed = " ".join(mapping.measured) if len(pairs) <= 6 else f"all {len(pairs)} slices"
            measured = f"; measured {listed} (as expected)"
        else:
            shown = ", ".join(f"{got} where {want} expected" for got, want in wrong[:4])
            more = f" and {len(wrong) - 4} more" if len(wrong) > 4 else ""
            measured = f"; NOT as expected: {shown}{more}"
    head = f"{c.serve_stream} ({c.role}) vs train {c.train_stream or 'layers'}{measured}"
    rows = c.slices if verbose else _pick(c.slices)
    # a sampled run shows its 95% interval after the cosine mean and the rel-RMS; a full run, nothing
    sampled = any(m.cosine_mean_se is not None or m.rel_rms_se is not None for m in c.slices)
    multiplier = half_width_multiplier(result)
    pm_head = f"{' ± 95%':<9}" if sampled else ""
    out = [
        head,
        f"  {'train slice':<16}{'cos mean':>10}{pm_head}{'cos p1':>10}{'rel-RMS':>10}{pm_head}{'SQNR dB':>9}"
        f"{'norm x':>9}{'max|d|':>10}{'bad rows':>10}",
    ]
    for m in rows:
        bad = m.serve_health.nonfinite_rows + m.serve_health.degenerate_rows
        bad += m.train_health.nonfinite_rows + m.train_health.degenerate_rows
        cos_pm = _pm(m.cosine_mean_se, multiplier) if sampled else ""
        rms_pm = _pm(m.rel_rms_se, multiplier) if sampled else ""
        out.append(
            f"  {m.label:<16}{_f(m.cosine_mean, 6):>10}{cos_pm}{_f(m.cosine_p1, 5):>10}{_g(m.rel_rms):>10}{rms_pm}"
            f"{_f(m.sqnr_db, 1):>9}{_g(m.norm_ratio):>9}{_g(m.max_abs_diff):>10}{bad:>10}"
        )
    if len(rows) < len(c.slices):
        out.append(f"  ({len(rows)} of {len(c.slices)} slices shown, the worst included; --json has them all)")
    out += explanation_lines(result, c.serve_stream)
    return out


def explanation_lines(result: CompareResult, stream: str) -> list[str]:
    """Each explained slice of ``stream``: the winning explanation and the runner-up, with their held-out fit."""
    explained = [e for e in result.explanations if e.serve_stream == stream]
    if not explained:
        return []
    out = [f"  explained (fitted on some sampled rows, held-out rel-RMS on the others; {explained[0].rows} rows):"]
    for e in explained:
        runner = f", runner-up {e.runner_up.name} ({_g(e.runner_up.held_out_rel_rms)})" if e.runner_up else ""
        out.append(f"    {e.label:<14}{e.winner.name} ({_g(e.winner.held_out_rel_rms)}){runner}")
        why = runner_up_lost(e.winner, e.runner_up) if e.runner_up else ""
        if why:
            out.append(f"    {'':<14}{why}")
    return out


def runner_up_lost(winner, runner_up) -> str:
    """Why a runner-up with the lower held-out error did not win ('' when its error is not lower):
    the simplest explanation that fits wins, so a more complex fit must do more than fit better."""
    if not (runner_up.held_out_rel_rms < winner.held_out_rel_rms):
        return ""
    if winner.fits and runner_up.complexity > winner.complexity:
        return (f"({runner_up.name} fits better but is the more complex explanation, and {winner.name} already "
                "fits within the tolerance: the simplest explanation that fits wins)")
    if not runner_up.fits:
        return f"({runner_up.name} fits better on these rows but not within the tolerance the policy allows)"
    return f"({runner_up.name} fits better, but the selection's rules keep {winner.name} here)"


def _pick(slices: list[SliceMetrics]) -> list[SliceMetrics]:
    if len(slices) <= MAX_ROWS:
        return slices
    worst = max(range(len(slices)), key=lambda i: slices[i].rel_rms if math.isfinite(slices[i].rel_rms) else math.inf)
    step = (len(slices) - 1) / (MAX_ROWS - 2)
    keep = {round(i * step) for i in range(MAX_ROWS - 1)} | {worst}
    return [slices[i] for i in sorted(keep)]


def _f(x: float, digits: int) -> str:
    return f"{x:.{digits}f}" if math.isfinite(x) else str(x)


def _g(x: float) -> str:
    return f"{x:.3g}" if math.isfinite(x) else str(x)


def half_width_multiplier(result: CompareResult) -> float:
    """Standard errors in the 95% half-width of a sampled result (results saved before the Student t
    interval carry none: they showed 1.96)."""
    return float(result.options.get("interval_multiplier", Z95))


def _pm(se: float | None, multiplier: float) -> str:
    """`` ±1.2e-04`` (the 95% half-width), 9 wide; ``±?`` where fewer than 2 samples give no estimate."""
    if se is None or not math.isfinite(se) or not math.isfinite(multiplier):
        return f"{' ±?':<9}"
    return f"{' ±' + format(multiplier * se, '.1e'):<9}"
