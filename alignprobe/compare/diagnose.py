"""The diagnosis: from the measurements (mapping searches, the streaming pass's metrics, the
explanations fitted on sampled rows) to findings and a verdict.

Order: the inputs themselves (same dump, swapped dumps, dtypes); per serve stream the width and the
mapping (diagnoses/layout.py); the explanations of each slice (explain/), which name the cause
where a slice is not its expected train slice and replace the mapping / numeric findings they
contradict (diagnoses/explained.py); the numeric findings of the slices that are their expected
train slice (diagnoses/numeric.py); then the notes the classes declare (RULES), resolved once, and
the verdict. Every finding is made whole by the class that owns it; none is edited afterwards.
"""

from __future__ import annotations

import dataclasses
from typing import cast

from alignprobe.compare.diagnoses import cap_of
from alignprobe.compare.diagnoses import tokens
from alignprobe.compare.explain import index_offset
from alignprobe.compare.diagnoses.explained import explanation_findings, judged, settled
from alignprobe.compare.diagnoses.inputs import dtype_findings, same_dump_findings, swapped_findings
from alignprobe.compare.diagnoses.layout import Layout, layout_findings, not_sliceable, width_findings, width_unmeasured
from alignprobe.compare.diagnoses.numeric import numeric_findings
from alignprobe.compare.diagnoses.short_rows import short_row_findings
from alignprobe.compare.nonfinite_where import NonfiniteWhere
from alignprobe.compare.plan import StreamPlan
from alignprobe.compare.policy import Policy
from alignprobe.compare.result import MappingSearch, SliceExplanation, StreamComparison, TokenCheck
from alignprobe.compare.sampling import interval_multiplier, undecided_thresholds
from alignprobe.dump import ROLE_DRAFTER_INPUT, ROLE_LAYERS, Dump
from alignprobe.findings import Finding, resolve, verdict_of
from alignprobe.findings.severity import Severity

# how the findings of one class bear on another's, declared by the owning classes
RULES = tokens.RULES + index_offset.RULES


@dataclasses.dataclass
class Diagnosis:
    findings: list[Finding]
    mappings: list[MappingSearch]
    explanations: list[SliceExplanation]
    verdict: str
    multiplier: float | None


@dataclasses.dataclass
class _Stream:
    """One serve stream's findings on the way: the mapping's, and what its explanations named."""

    layout: Layout
    measured: list[Finding]
    explained: list[SliceExplanation]
    by_fit: list[Finding]


def diagnose(train: Dump, serve: Dump, plans: list[StreamPlan], found: dict[str, MappingSearch],
             comparisons: list[StreamComparison], tokens_checked: TokenCheck, policy: Policy, hidden_size: int,
             num_layers: int, sampled_run: bool, compared_samples: int, notes: list[str],
             explained_by_stream: dict[str, list[SliceExplanation]], nonfinite_where: NonfiniteWhere) -> Diagnosis:
    short = short_row_findings(train, serve, policy)
    findings = tokens.token_findings(tokens_checked, policy, short)
    findings += same_dump_findings(train, serve, comparisons, policy)
    findings += swapped_findings(train, serve, policy)
    findings += dtype_findings(train, serve, policy)
    findings += short
    provenances = dataclasses.asdict(train.provenance), dataclasses.asdict(serve.provenance)
    train_prov, serve_prov = provenances
    reads_aux = any(p.role == ROLE_DRAFTER_INPUT and len(p.expected) > 1 for p in plans)
    drafter_compared = any(p.role == ROLE_DRAFTER_INPUT for p in plans)
    caps = {p.serve_stream: cap_of(p.role, drafter_compared) for p in plans}
    mappings, explanations = [], []
    by_stream: dict[str, _Stream | list[Finding]] = {}  # in plan order: a stream's mapping findings
    for plan in plans:
        cap = caps[plan.serve_stream]
        if plan.num_slices == 0:
            by_stream[plan.serve_stream] = [not_sliceable(plan.serve_stream, serve.dataset(plan.serve_stream).shape[1],
                                                           hidden_size, policy, cap)]
            continue
        if plan.serve_stream not in found:  # no aligned rows to search on
            if not plan.width_ok:
                by_stream[plan.serve_stream] = [width_unmeasured(plan.serve_stream, serve.dataset(plan.serve_stream).shape[1],
                                                                  plan.expected_labels, hidden_size, policy, cap)]
            continue
        ms = found[plan.serve_stream]
        mappings.append(ms)
        if not plan.width_ok:
            by_stream[plan.serve_stream] = width_findings(ms, plan.expected_labels, hidden_size, num_layers, policy,
                                                          serve_prov, cap)
            continue
        layout = _layout(ms, plan, num_layers, policy, provenances, cap)
        explained = explained_by_stream.get(plan.serve_stream, []) if plan.role != ROLE_LAYERS else []
        explanations += explained
        by_fit: list[Finding] = []
        if explained:
            expected_hf = [k[0] for k in plan.expected_keys if k is not None]
            mapped_ok = list(layout.slice_ok)
            by_fit = explanation_findings(plan.serve_stream, plan.role, explained, expected_hf, num_layers, policy,
                                          serve_prov, train_prov, reads_aux, mapped_ok, cap)
            for e in explained:  # the fits decide which slices the numeric checks judge
                layout.slice_ok[e.serve_slice] = judged(e, mapped_ok[e.serve_slice])
        by_stream[plan.serve_stream] = _Stream(layout, list(layout.findings), explained, by_fit)
    if sampled_run and compared_samples < 2:
        notes.append(
            f"sampling: {compared_samples} sample compared: its error cannot be estimated from the "
            "spread between samples; compare at least 2 (a larger --max-tokens or --sample)"
        )
    multiplier = interval_multiplier(compared_samples) if sampled_run else None
    numeric_level = []
    for comparison in comparisons:
        stream = by_stream.get(comparison.serve_stream)
        stream = stream if isinstance(stream, _Stream) else None
        ok = [stream.layout.slice_ok[m.serve_slice] if stream else False for m in comparison.slices]
        comparison.mapping_ok = bool(ok) and all(ok)
        if multiplier is not None:  # a sampled run
            notes += _undecided_notes(comparison, ok, policy, multiplier)
        numeric = numeric_findings(comparison, ok, policy, train_prov, serve_prov, stream.explained if stream else [],
                                   caps.get(comparison.serve_stream), nonfinite_where.evidence(comparison.serve_stream),
                                   serve)
        if stream is not None and stream.explained:
            mapping, numeric = settled(stream.by_fit, stream.measured, numeric, all(stream.layout.slice_ok))
            by_stream[comparison.serve_stream] = mapping
        numeric_level += numeric
    for name, stream in by_stream.items():  # a stream explained without a comparison (none measured)
        if isinstance(stream, _Stream):
            by_stream[name] = (settled(stream.by_fit, stream.measured, [], all(stream.layout.slice_ok))[0]
                               if stream.explained else stream.measured)
    findings += [f for mapping in by_stream.values() for f in cast(list[Finding], mapping)] + numeric_level
    findings = resolve(findings, RULES)
    return Diagnosis(findings, mappings, explanations, verdict_of(f.severity for f in findings), multiplier)


def _undecided_notes(comparison: StreamComparison, slice_ok: list[bool], policy: Policy, multiplier: float) -> list[str]:
    """A note for each mapped slice whose rel-RMS 95% interval holds a drift threshold."""
    thresholds = {"drift_warn_rel_rms": policy.drift_warn_rel_rms, "drift_fail_rel_rms": policy.drift_fail_rel_rms}
    out = []
    for m, ok in zip(comparison.slices, slice_ok):
        se = m.rel_rms_se
        near = undecided_thresholds(m.rel_rms, se, thresholds, multiplier) if ok and se is not None else []
        if near and se is not None:
            out.append(
                f"sampling: {comparison.serve_stream} {m.label} rel-RMS {m.rel_rms:.4g} ± {multiplier * se:.2g} "
                f"(95%) holds {' and '.join(f'{n} {thresholds[n]:g}' for n in near)}: "
                "the sample cannot tell: compare more samples"
            )
    return out


def _layout(ms, plan: StreamPlan, num_layers: int, policy: Policy, provenances: tuple[dict, dict],
            cap: Severity | None) -> Layout:
    """Layout diagnosis on the slices that have an expectation (all of them outside layers stacks)."""
    keep = [j for j, e in enumerate(plan.expected_keys) if e is not None]
    expected = [e for e in plan.expected_keys if e is not None]
    if len(keep) == len(plan.expected_keys):
        return layout_findings(ms, expected, num_layers, policy, provenances, cap)
    sub = dataclasses.replace(
        ms,
        matches=[ms.matches[j] for j in keep],
        expected=[plan.expected_labels[j] for j in keep],
        claimed=[ms.claimed[j] for j in keep] if ms.claimed else [],
    )
    result = layout_findings(sub, expected, num_layers, policy, provenances, cap)
    ok = [False] * len(plan.expected_keys)
    for j, good in zip(keep, result.slice_ok):
        ok[j] = good
    return Layout(result.findings, ok)
