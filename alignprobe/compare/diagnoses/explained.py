"""Findings from the explanations (compare/explain/): the cause each serve stream's slices point to.

Each explanation names its own finding (its module's ``code`` and ``fix``, or ``names``); this module
groups the slices of a stream by the code they name and settles which of the stream's measured
findings stand. Where every slice of a stream is explained as its expected train slice, the numeric
findings of the streaming pass speak, and a mapping finding the fits contradict (CONTRADICTED) is
dropped. Where some slice is explained otherwise, that explanation is the finding: its fitted
parameters are the evidence, and the mapping / scale / drift findings of that stream, which judged
it as the expected slice or as a tap (REPLACED), give way; one the fits name too keeps its wording
and gains their evidence.
"""

from __future__ import annotations

import dataclasses

from alignprobe.compare.diagnoses.layout import PARTIAL_TRAIN
from alignprobe.compare.explain import explanation
from alignprobe.compare.explain.base import Named, Naming, evidence_of
from alignprobe.compare.policy import Policy
from alignprobe.compare.result import SliceExplanation
from alignprobe.findings import Finding, Subject, make
from alignprobe.findings.severity import Severity

# codes a stream's explanations replace when some slice is not its expected train slice
REPLACED = ("layer_offset", "wrong_taps", "final_norm_mismatch", "scale_mismatch", "numeric_drift",
            "position_drift", "claim_mismatch", "mapping_ambiguous")
# ... and those the fits contradict when every slice is its expected train slice
CONTRADICTED = ("layer_offset", "wrong_taps", "final_norm_mismatch")
# the codes that take the mapping's word that the train dump holds only some layers
TAPS = ("layer_offset", "wrong_taps")


def judged(e: SliceExplanation, mapped_ok: bool) -> bool:
    """The numeric checks judge this slice: its explanation says it is its expected train slice (or
    names nothing where the mapping search measured it so)."""
    winner = explanation(e.winner.name)
    return winner.judged or (winner.defers_to_mapping and mapped_ok)


def explanation_findings(stream: str, role: str, explained: list[SliceExplanation], expected_hf: list[int],
                         num_layers: int, policy: Policy, serve_provenance: dict, train_provenance: dict,
                         drafter_reads_aux: bool, mapped_ok: list[bool] | None = None,
                         cap: Severity | None = None) -> list[Finding]:
    """``mapped_ok``: per serve slice, the mapping search measured it as its expected train slice; such a
    slice that no explanation fits is the right layer too far off to name: numeric_drift judges it."""
    mapped_ok = mapped_ok or [False] * len(explained)
    naming = Naming(stream, role, explained, expected_hf, num_layers, serve_provenance, train_provenance,
                    drafter_reads_aux)
    by_name: dict[str, list[SliceExplanation]] = {}
    for e in explained:
        winner = explanation(e.winner.name)
        if not (winner.defers_to_mapping and mapped_ok[e.serve_slice]):
            by_name.setdefault(e.winner.name, []).append(e)
    own: list[Finding] = []
    # One finding per code: slices of one stream explained by two explanations of one cause (rows of
    # other samples found as whole samples on some slices, as blocks on others) are one finding.
    by_code: dict[str, tuple[Named, list[SliceExplanation]]] = {}
    for name, group in by_name.items():
        named = explanation(name).names(group, naming)
        if named is None:
            continue
        if named.evidence is not None:  # a finding the explanation words itself
            own.append(_made(named, named.title, named.evidence, stream, group, policy, cap))
            continue
        if named.code in by_code:
            first, first_group = by_code[named.code]
            notes = first.notes + tuple(n for n in named.notes if n.code not in {m.code for m in first.notes})
            named = dataclasses.replace(named, notes=notes)
            group = sorted(first_group + group, key=lambda e: e.serve_slice)
        by_code[named.code] = (named, group)
    return own + [_made(named, _title(group), evidence_of(group), stream, group, policy, cap)
                  for named, group in by_code.values()]


def _made(named: Named, title: str, evidence: dict, stream: str, group: list[SliceExplanation], policy: Policy,
          cap: Severity | None) -> Finding:
    return make(named.code, title, evidence, named.fix, policy=policy, severity=named.severity, cap=cap,
                subject=Subject(stream, tuple(e.label for e in group)), notes=named.notes)


def _title(group: list[SliceExplanation]) -> str:
    where = ", ".join(e.label for e in group)
    first = group[0].winner
    return f"{where}: {first.summary} (held-out rel-RMS {_g(first.held_out_rel_rms)})"


def _g(x: float) -> str:
    return f"{x:.3g}" if x == x else "not measurable"


def settled(by_fit: list[Finding], measured: list[Finding], numeric: list[Finding],
            every_slice_expected: bool) -> tuple[list[Finding], list[Finding]]:
    """The stream's (mapping, numeric) findings once its explanations have spoken (``by_fit``: what they
    name; ``every_slice_expected``: each slice is its expected train slice by its fit)."""
    if not by_fit:
        if every_slice_expected:
            measured = [f for f in measured if f.code not in CONTRADICTED]
        return measured, numeric
    same = {f.code: f for f in measured if f.code in REPLACED}
    partial = next((n for f in same.values() for n in f.notes if n.code == PARTIAL_TRAIN), None)
    kept = [f for f in measured if f.code not in REPLACED]
    for f in by_fit:
        if f.code in same and not _knows_more(f):  # the mapping measured it too: its wording stands, with the fits' evidence
            f = _joined(same[f.code], f)
        elif partial is not None and f.code in TAPS:
            f = f.with_note(partial)  # the mapping's word that the train dump holds only some layers
        kept.append(f)
    at = {f.code: i for i, f in enumerate(kept)}
    left = []
    for f in numeric:
        if f.code in at:  # the fits name the same code: the measured wording and evidence join that finding
            kept[at[f.code]] = _joined(f, kept[at[f.code]])
        elif f.code not in REPLACED:
            left.append(f)
    return kept, left


# index_offset's bases that read what the mapping search cannot: the serve side's claims checked by an
# exact match elsewhere, or the serve side's own layer stack (explain/index_offset.py)
BEYOND_MAPPING = ("claims", "serve_layers")


def _knows_more(fit: Finding) -> bool:
    """The fits named a slice from what the mapping search never saw (a train dump of a few layers, the
    serve slice another one): their wording stands over the mapping's nearest-neighbour one."""
    return any(e.get("params", {}).get("basis") in BEYOND_MAPPING for e in fit.evidence.get("explained", []))


def _joined(measured: Finding, fit: Finding) -> Finding:
    """One finding where the measurements and the explanations name the same code: the measured one, with
    the explanations' evidence over its own and their severity (which weighs whom the state feeds)."""
    return dataclasses.replace(measured, evidence={**measured.evidence, **fit.evidence}, severity=fit.severity,
                               notes=measured.notes + tuple(n for n in fit.notes if not measured.has_note(n.code)))
