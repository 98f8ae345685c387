"""Another tap: the serve slice is a train state of another HF index (a layer-id convention offset).

Measured where the train side holds that index: the candidate is chosen on the fit rows and scored
on the held-out ones. Where the train side holds only a few layers (a SpecForge or speculators
dataset: the drafter's three), the index the serve slice really is may not be there to measure;
then both sides' claims give the shift, and it is accepted only when some other serve slice whose
claimed index the train side does hold equals it exactly (the serve claims are then honest).

Where the serve dump holds a layer stack too (capture hf against such a dataset), the exact matches
decide before either: the train slice equals one serve layer, the serve slice another, each to the
last bits and clearly closer than to any other layer, so the shift is measured on both sides whatever
the train dump's claims say (a dataset read with the wrong ids claims other layers than it holds; a
neighbouring layer then matched the serve slices "not a constant shift", and their claims, checked
against slices the train dump claims wrongly, could not be verified).

Under numeric drift (an INT4 serve side) the right index fits only within the drift tolerance, like
the expected one does with no offset. Both are predictors with no fitted parameter, so the index
that fits the held-out rows clearly better is the one the slice is: drift of one layer's state
moves it no closer to its neighbour (a shifted INT4 capture fitted its real index at rel-RMS 0.10
and the expected one at 0.32).
"""

from __future__ import annotations

from alignprobe.compare.explain.base import (ExplainRows, Explanation, Named, Naming, RowFit, choice_columns, evidence_of,
                                             rel_rms, scored)
from alignprobe.compare.result import ExplanationFit
from alignprobe.findings import Supersedes
from alignprobe.findings.severity import Severity
from alignprobe.system_fixes import offset_fix, train_ids_fix, wrong_taps_fix


# an offset under drift must leave at most this fraction of the expected index's held-out rel-RMS
DRIFT_CLEARLY_BETTER = 0.8
# a slice is "that serve layer" only when its held-out rel-RMS to it is within the tolerance and at
# most this fraction of its rel-RMS to the next-closest serve layer: an exact match (6e-5 between a
# SpecForge slice and capture hf's layer) against neighbours 0.03 apart on an untrained model
EXACT_MARGIN = 0.5


class IndexOffset(Explanation):
    name = "index_offset"
    complexity = 2

    def names(self, group: list, naming: Naming) -> Named:
        """A layer offset (one shift for every slice), wrong taps (shifts that differ, or some slices in
        place), or the final state in its other final-norm form (a shift of 0)."""
        explained = naming.explained
        shifts = {e.winner.params["offset"] for e in group}
        measured = {e.serve_slice: e.winner.params["measured"] for e in group}
        labels = [measured.get(e.serve_slice, e.label) for e in explained]
        # the train slices as measured on the serve side's layer stack, where they were (serve_layers basis)
        trained = {e.serve_slice: e.winner.params["train_measured"] for e in group if "train_measured" in e.winner.params}
        expected = [trained.get(e.serve_slice, e.label) for e in explained]
        claimed_by_train = [e.label for e in explained]
        evidence = evidence_of(group)
        if shifts == {0} and all(e.winner.params.get("train_claim_refuted") for e in group):
            return _train_claims_off(group, claimed_by_train, expected, evidence, naming.train_provenance)
        if shifts == {0}:  # the same HF index in its other final-norm form: pair with the one it equals
            title = (f"the serve final state is {labels[-1]}, the other form of HF[{naming.num_layers}] than expected "
                     f"({explained[-1].label}); compared with the one it equals")
            fix = ("Nothing to fix when the drafter does not read this state; otherwise capture both sides at the "
                   "same side of the final norm.")
            severity: Severity | None = "info" if naming.drafter_reads_aux and naming.role == "final" else None
            return Named("final_norm_mismatch", fix, severity=severity, title=title, evidence=evidence)
        if len(shifts) == 1 and len(group) == len(explained):
            shift = shifts.pop()
            want = [e.winner.params.get("train_measured_hf_index", hf) for e, hf in zip(explained, naming.expected_hf)]
            fix, cause = offset_fix(shift, want, naming.num_layers, naming.serve_provenance, naming.train_provenance)
            basis = sorted({e.winner.params.get("basis", "measured") for e in group})
            evidence.update(shift=shift, convention=cause, conventions=[cause], basis=basis, measured=labels,
                            expected=expected)
            title = (f"layer offset {shift:+d}: the serve side captured {', '.join(labels)} where training used "
                     f"{', '.join(expected)}" + _claims_note(group, basis))
            if expected != claimed_by_train:
                evidence.update(train_claimed=claimed_by_train)
                title += (f"; the train dump claims {', '.join(claimed_by_train)}, but its states are "
                          f"{', '.join(expected)}")
                fix = f"{fix} {train_ids_fix(naming.train_provenance)}"
            return Named("layer_offset", fix, title=title, evidence=evidence)
        evidence.update(measured=labels, expected=expected, deltas=[e.winner.params.get("offset", 0) for e in explained])
        title = f"wrong taps: the serve side captured {', '.join(labels)} where training used {', '.join(expected)}"
        return Named("wrong_taps", wrong_taps_fix(naming.serve_provenance, naming.num_layers), title=title,
                     evidence=evidence)

    def fit(self, rows: ExplainRows, j: int) -> ExplanationFit | None:
        expected = rows.expected[j]
        if expected is None:
            return None
        exact = self._from_serve_layers(rows, j)
        if exact is not None:
            return exact
        b = rows.serve[:, j]
        others = [key for key in rows.train if key != expected]
        if others:
            cols = choice_columns(b.shape[1])
            fit_b = b[rows.fit, cols]
            best = min(others, key=lambda key: rel_rms(rows.train[key][rows.fit, cols], fit_b))
            measured = scored(
                self, rows, rows.train[best], b,
                {"measured": rows.label(best), "measured_hf_index": best[0], "expected": rows.label(expected),
                 "offset": best[0] - expected[0], "basis": "measured"},
                f"serve = train {rows.label(best)} where {rows.label(expected)} was expected (offset {best[0] - expected[0]:+d})",
                measured=rows.as_is(best, j))  # the other slice taken unchanged
            if measured.fits:
                return measured
            with_drift = self._with_drift(rows, measured, expected, j)
            if with_drift is not None:
                return with_drift
        else:
            measured = None
        inferred = self._from_claims(rows, j)
        return inferred or measured

    @staticmethod
    def _with_drift(rows: ExplainRows, measured: ExplanationFit, expected, j: int) -> ExplanationFit | None:
        if expected not in rows.train or not measured.held_out_rel_rms <= rows.drift_tolerance:
            return None
        own = rows.as_is(expected, j)[0]  # the expected index's held-out rel-RMS (identity's)
        if not measured.held_out_rel_rms <= DRIFT_CLEARLY_BETTER * own:
            return None
        measured.fits = True
        measured.params.update(with_drift=True, expected_held_out_rel_rms=own)
        measured.summary += f", with numeric drift (the expected index leaves {own:.3g})"
        return measured

    def _from_serve_layers(self, rows: ExplainRows, j: int) -> ExplanationFit | None:
        """The train slice and serve slice ``j`` each matched exactly to a serve layer (module doc)."""
        expected = rows.expected[j]
        if not rows.serve_layers or expected not in rows.train:
            return None
        trained, served = _layer_of(rows, rows.train[expected]), _layer_of(rows, rows.serve[:, j])
        if trained is None or served is None:
            return None  # a layer not held exactly
        (t_key, t_fit), (s_key, s_fit) = trained, served
        shift = s_key[0] - t_key[0]
        refuted = t_key[0] != expected[0]  # the train slice is another layer than it claims (its ids read wrongly)
        if shift == 0 and not refuted:
            return None  # the same index as claimed: identity, or the other final norm
        held_rms = max(t_fit[0], s_fit[0])
        return ExplanationFit(
            name=self.name, complexity=self.complexity, fits=True, held_out_rel_rms=held_rms,
            held_out_cosine=min(t_fit[1], s_fit[1]), fit_rel_rms=max(t_fit[2], s_fit[2]),
            held_out_rows=int(rows.held_out.sum()),
            params={"measured": rows.label(s_key), "measured_hf_index": s_key[0], "expected": rows.label(expected),
                    "train_measured": rows.label(t_key), "train_measured_hf_index": t_key[0], "offset": shift,
                    "basis": "serve_layers",
                    "train_slice_rel_rms": t_fit[0], "serve_slice_rel_rms": s_fit[0], "expected_hf_index": expected[0],
                    "train_claim_refuted": refuted},
            summary=f"the train slice ({rows.label(expected)} claimed) equals the serve side's {rows.label(t_key)} "
                    f"(rel-RMS {t_fit[0]:.2g}) and this serve slice its {rows.label(s_key)} (rel-RMS {s_fit[0]:.2g}): "
                    f"offset {shift:+d}" + (f"; the train slice is not the {rows.label(expected)} it claims" if refuted else ""),
        )

    def _from_claims(self, rows: ExplainRows, j: int) -> ExplanationFit | None:
        claimed, expected = rows.claimed[j], rows.expected[j]
        held = {key[0] for key in rows.train}
        if claimed is None or expected is None or claimed == expected[0] or claimed in held:
            return None
        shifts = {c - e[0] for c, e in zip(rows.claimed, rows.expected) if c is not None and e is not None}
        shift = claimed - expected[0]
        # an honest claim elsewhere: a serve slice claiming an index the train side holds, equal to it
        # (in either final-norm form: HF[N] claimed by a vLLM capture is its pre-norm final). Verified
        # claims stand whatever their shifts: late taps [6, 7, 8] of a drafter trained on HF[2, 4, 5],
        # checked by HF[8] against the train side's pre-norm final, are the taps the engine read.
        checkable = 0
        for o, c in enumerate(rows.claimed):
            keys = [k for k in rows.train if k[0] == c]
            if o == j or not keys:
                continue
            checkable += 1
            fits = [(as_is.rel_rms(rows.held_out), as_is.mean_cosine(rows.held_out), key)
                    for key in keys for as_is in [rows.as_is_rows(key, o)]]
            error, cosine, key = min(fits, key=lambda f: f[0])
            if error <= rows.tolerance:
                return ExplanationFit(
                    # the held-out fit of the slice that verifies the claims: this one cannot be measured
                    name=self.name, complexity=self.complexity, fits=True, held_out_rel_rms=error,
                    held_out_cosine=cosine, fit_rel_rms=error, held_out_rows=int(rows.held_out.sum()),
                    params={"measured": f"HF[{claimed}]", "measured_hf_index": claimed, "expected": rows.label(expected),
                            "offset": shift, "basis": "claims",
                            "verified_by": {"serve_slice": o, "equals": rows.label(key), "held_out_rel_rms": error}},
                    summary=f"serve claims HF[{claimed}] (offset {shift:+d}), which the train side does not hold; "
                            f"serve slice {o} claims {rows.label(key)} and equals it (rel-RMS {error:.2g}), "
                            "so the claims are honest",
                )
        if checkable or len(shifts) != 1:
            return None  # the claims could be checked and none held, or they disagree: not to be trusted
        # Nothing can check them: no serve slice claims an index the train side holds (SpecForge ids
        # [1, 5, 8] read by vLLM as HF[1, 5, 8] against a train set of HF[2, 6, 9] only). The claims are
        # the serve side's own configuration, and the states are not the expected ones (identity,
        # simpler, did not fit), so the claimed offset is the cause named, with no held-out fit: a
        # rotation or a per-channel weight fitted to the expected slice can map a neighbouring layer
        # onto it (a trained 12-layer Llama's HF[5] onto HF[6] at rel-RMS 0.008), and would be a
        # confident wrong cause where the claims say which layer the engine captured.
        return ExplanationFit(
            name=self.name, complexity=self.complexity, fits=True, held_out_rel_rms=float("nan"),
            held_out_cosine=float("nan"), fit_rel_rms=float("nan"), held_out_rows=0,
            params={"measured": f"HF[{claimed}]", "measured_hf_index": claimed, "expected": rows.label(expected),
                    "offset": shift, "basis": "claims", "verified_by": None,
                    "unverified": "no serve slice claims an index the train dump holds"},
            summary=f"serve claims HF[{claimed}] (offset {shift:+d}), which the train dump does not hold, and its "
                    f"states are not {rows.label(expected)}; no serve slice claims a layer the train dump holds, "
                    "so the claims could not be checked",
        )


EXPLANATION = IndexOffset()


def _layer_of(rows: ExplainRows, x):
    """(key, held-out scores) of the serve layer that rows ``x`` equal (EXACT_MARGIN), or None."""
    cols = choice_columns(x.shape[1])
    fit_x = x[rows.fit, cols]
    errors = sorted((rel_rms(layer[rows.fit, cols], fit_x), key) for key, layer in rows.serve_layers.items())
    if not errors:
        return None
    key = errors[0][1]
    best = RowFit.of(rows.serve_layers[key], x).scores(rows.fit)
    if not best[0] <= rows.tolerance:
        return None
    if len(errors) > 1:
        runner = RowFit.of(rows.serve_layers[errors[1][1]], x).scores(rows.fit)
        if not best[0] <= EXACT_MARGIN * runner[0]:
            return None
    return key, best


def _refutes_train_claims(finding) -> bool:
    return "train_claimed" in finding.evidence


# Where the train dump's claims are refuted, what another stream measured by pairing those claims with
# the serve side's layers (a capture hf layer stack) compared other layers than it says: void.
RULES = (Supersedes("layer_offset", ("wrong_taps", "numeric_drift"), streams="other", when=_refutes_train_claims),)


def _train_claims_off(group: list, claimed: list[str], states: list[str], evidence: dict,
                      train_provenance: dict) -> Named:
    """The serve slices are the train states, but the train dump claims other layers than those states
    are (each equal to a serve layer of another index): the train dump's ids were read wrongly. The
    drafter is fed what it was trained on; what the dump says it was trained on is off, and serving
    configured from those ids would capture the wrong layers."""
    deltas = sorted({e.winner.params["train_measured_hf_index"] - e.winner.params["expected_hf_index"] for e in group})
    evidence.update(shift=deltas[0] if len(deltas) == 1 else deltas, basis=["serve_layers"], measured=states,
                    expected=states, train_claimed=claimed)
    shift = f"{deltas[0]:+d}" if len(deltas) == 1 else "/".join(f"{d:+d}" for d in deltas)
    title = (f"layer offset {shift} in the train dump's claims: it claims {', '.join(claimed)}, but its states are "
             f"{', '.join(states)} (each equal to the serve side's layer of that index), the states the serve side "
             "captured too")
    fix = (f"{train_ids_fix(train_provenance)} Serving feeds the trained states; keep the engine's ids as they are, "
           "not the ones the train dump claims.")
    return Named("layer_offset", fix, severity="warn", title=title, evidence=evidence)


def _claims_note(offsets: list, basis: list[str]) -> str:
    if "claims" not in basis:
        return ""
    if any(e.winner.params.get("unverified") for e in offsets):
        return (" (from both sides' claims alone: the train dump holds none of the layers the serve side claims, "
                "so no slice could be checked; capture the train side with every layer to measure it)")
    return " (inferred from both sides' claims and the slices that match exactly)"
