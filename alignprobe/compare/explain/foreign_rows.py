"""Rows from another sample or request: every serve sample's rows are the train rows, at the same
positions and HF index, of some other sample (a row swap inside a batch, every request given the
previous request's rows), or rows that match no train row at all but agree with each other across
samples (padding rows leaking from a padded batch: the pad token's states).

Where the source sample is shorter, the rows past its end are either the sample's own (a stale buffer
overwritten only as far as the other request reached) or the next sample's from its start: a batch's
rows flattened into one buffer and sliced at a wrong offset, as in SGLang #32089 (the offset not
advanced past a request that asked for no hidden states: the next request gets that request's rows,
then its own first ones). Both readings are tried; the one that fits the fit rows better is kept."""

from __future__ import annotations

import numpy as np

from alignprobe.compare.explain.base import ExplainRows, FromExpected, Key, RowFit, choice_columns, row_sums, scored
from alignprobe.compare.result import ExplanationFit


class ForeignRows(FromExpected):
    name = "foreign_rows"
    complexity = 4
    code = "foreign_rows"
    narrower_than = ("displaced_rows",)
    fix = ('Rows belong to another request: the capture mixes up the order of a batch (request ids against '
           'the batch order), returns stale rows of the previous request, or keeps padding rows of a padded '
           'batch. Capture one request at a time to confirm, then fix the request-to-row bookkeeping.')

    def fit_pair(self, rows: ExplainRows, j: int, key: Key, a: np.ndarray, b: np.ndarray) -> ExplanationFit | None:
        samples = np.unique(rows.sample)
        if len(samples) < 2:
            return None
        sources: dict[int, int] = {}
        flattened: list[str] = []  # samples whose rows continue into the next sample's (one flat buffer)
        readings: dict[int, bool | None] = {}  # per sample: the flat reading, the stale one, or undecided
        lengths = {int(t): int(rows.position[rows.sample == t].max()) + 1 for t in samples}
        # The source is chosen on evenly spaced channels (as row_shift and index_offset choose theirs):
        # this search tries every sample twice for every sample, the explanations' largest cost at
        # H = 7168 (benchmarks/README.md); the winner's guess is then scored on every channel.
        cols = choice_columns(a.shape[1])
        ca, cb = a[:, cols], b[:, cols]
        for s in samples:
            mine = np.flatnonzero(rows.sample == s)
            chosen_on = mine[rows.fit[mine]]  # the source sample is chosen on this sample's fit rows
            if not len(chosen_on):
                continue
            # every (source, reading) at once; the flat reading differs from the stale one only past
            # the source's end. The sample itself goes first, so that it wins a tie: a shorter sample
            # that reaches none of its rows "gives" it its own rows in the stale reading, the same
            # error to the last bit (a capture that kept only each prompt's last chunk had samples
            # "moved" to the first one that way, and named foreign_rows at identity's exact fit).
            others = [int(t) for t in samples if t != s]
            tried = [(int(s), False)] + [
                (t, flat) for t in others
                for flat in ((False, True) if np.any(rows.position[chosen_on] >= lengths[t]) else (False,))
                if flat or np.any(rows.position[chosen_on] < lengths[t])]  # a stale source must supply a row
            source_rows = _source_rows(rows, [t for t, _ in tried], [flat for _, flat in tried], chosen_on, lengths)
            # each candidate's squared error summed over its own (rows x channels), as one np.sum of it
            errors = ((ca[source_rows] - cb[chosen_on]) ** 2).reshape(len(tried), -1).sum(axis=1)
            best: tuple[float, int, bool] | None = None
            for error, (t, flat) in zip(errors.tolist(), tried):
                if best is None or error < best[0] * (1 - 1e-9):
                    best = (error, t, flat)
            assert best is not None  # at least the flat reading is tried
            sources[int(s)] = best[1]
            # the fit rows decide the reading only if some of them lie past the source's end
            decides = bool(np.any(rows.position[chosen_on] >= lengths[best[1]]))
            readings[int(s)] = best[2] if decides else None
        # One bookkeeping bug reads every request the same way: a sample whose fit rows end before its
        # source does takes the reading most samples that could tell chose (else the stale one)
        told = [flat for flat in readings.values() if flat is not None]
        usual = bool(told) and 2 * sum(told) > len(told)
        guessed_from = np.full(len(b), -1)  # each row's train row in the guess (-1: none, a zero guess)
        for s, t in sources.items():
            reading = readings[s]
            flat = usual if reading is None else reading
            if flat and t != s:
                flattened.append(rows.sample_ids[s])
            mine = np.flatnonzero(rows.sample == s)
            guessed_from[mine] = _source_rows(rows, [t], [flat], mine, lengths)[0]  # the winner's, on every row
        has_guess = guessed_from >= 0
        predicted = a[np.maximum(guessed_from, 0)]
        predicted[~has_guess] = 0
        predicted_squares = np.where(has_guess, rows.train_squares(key)[np.maximum(guessed_from, 0)], 0.0)
        # rows no train row of the chosen source explains: padding rows agree with each other by position
        error = row_sums(b - predicted)
        unexplained = np.sqrt(error) > rows.tolerance * np.sqrt(rows.serve_squares(j))
        unexplained &= _edge_runs(rows, unexplained)  # padding sits at an end of its sample (see _padding)
        padding = self._padding(rows, b, unexplained)
        if padding is not None:
            predicted[unexplained] = padding[unexplained]
            error[unexplained] = row_sums(b[unexplained] - predicted[unexplained])
            predicted_squares[unexplained] = row_sums(predicted[unexplained])
        guessed = RowFit(error=error, actual=rows.serve_squares(j), predicted=predicted_squares,
                         dot=row_sums(predicted, b))
        # A sample whose source was not among the samples read (the first of a run, given the rows of
        # the request before it) is explained by none of them: judged on its fit rows alone, it is left
        # out of the score and named, so the others' held-out rows still decide.
        lost = [int(s) for s in samples if not self._explained(rows, guessed, s)]
        if 2 * len(lost) > len(samples) or len(samples) - len(lost) < 2:
            lost = []  # most samples unexplained: no source pattern to name, scored as they are
        moved = {rows.sample_ids[s]: rows.sample_ids[t] for s, t in sources.items() if s != t and s not in lost}
        if not moved:
            # No sample holds another's rows and none has padding rows: there is no pattern whose
            # first request could lack its source, so no sample may be left out of the score. Leaving
            # out the samples a clean pair fits worst (a DeepseekV3 in float16 against bfloat16: the
            # samples where expert routing flipped for a token) scored 0.005 against identity's 0.026
            # and was named foreign_rows. Padding rows have no source sample either: with padding alone,
            # leaving samples out had "explained" half the samples away (a serve side without the BOS
            # the train side has, and one whose values saturate in FP8: 4 of 8 samples left out, the
            # early or large rows called padding; tests/cases/holdout3_cases.py no_bos, fp8_saturated).
            lost = []
            moved = {rows.sample_ids[s]: rows.sample_ids[t] for s, t in sources.items() if s != t}
        if not moved and padding is None:
            return None
        order = {s: i for i, s in enumerate(samples.tolist())}
        kept_sources = {s: t for s, t in sources.items() if s not in lost}
        pattern = "other samples"
        if moved and all(order.get(t, -9) == order[s] - 1 for s, t in kept_sources.items() if s != t):
            pattern = "the previous request"
        elif moved and all(kept_sources.get(t) == s for s, t in kept_sources.items() if s != t):
            pattern = "swapped pairwise"
        keep = ~np.isin(rows.sample, lost)
        params = {"sources": moved, "samples_moved": len(moved), "samples": len(samples), "pattern": pattern,
                  "padding_rows": int(unexplained.sum()) if padding is not None else 0, "hf_index": key[0],
                  "samples_source_not_read": [rows.sample_ids[s] for s in lost],
                  "continues_into_next_sample": [i for i in flattened if i in moved]}
        what = []
        if moved:
            what.append(f"{len(moved)} of {len(samples)} samples hold the rows of {pattern}")
        if lost:
            what.append(f"{len(lost)} more whose source was not among the samples read")
        if padding is not None:
            what.append(f"{int(unexplained.sum())} rows match no train row but agree across samples (padding rows)")
        return scored(self, rows, None, None, params, "; ".join(what),
                      fit_mask=rows.fit[keep], measured=guessed.subset(keep).scores(rows.fit[keep]))

    @staticmethod
    def _explained(rows: ExplainRows, guessed: RowFit, s) -> bool:
        """Sample s's fit rows are predicted within the tolerance (held-out rows never decide this;
        inf, never within, where they are none or all zero)."""
        return guessed.rel_rms((rows.sample == s) & rows.fit) <= rows.tolerance

    @staticmethod
    def _padding(rows: ExplainRows, b: np.ndarray, unexplained: np.ndarray) -> np.ndarray | None:
        """Predict each unexplained row by the mean of the other samples' unexplained rows nearest in
        position (a pad token attending only to pads has one state at every position); None when too
        few rows are unexplained to call it padding. The row scored never predicts itself. Only rows
        in a run at either end of their sample count: a padded batch puts its pad rows after the
        prompt (right padding) or before it (left), never between its tokens; rows scattered inside a
        sample that are alike across samples are a state of another kind (a layer's output without
        the residual was "explained" as padding at rel-RMS 0.046, with 259 scattered rows)."""
        if unexplained.sum() < 4:
            return None
        out = np.zeros_like(b)
        found = np.zeros(len(b), dtype=bool)
        for r in np.flatnonzero(unexplained):
            peers = np.flatnonzero(unexplained & (rows.sample != rows.sample[r]))
            if len(peers):
                nearest = peers[np.argsort(np.abs(rows.position[peers] - rows.position[r]), kind="stable")[:4]]
                out[r] = b[nearest].mean(axis=0)
                found[r] = True
        # Pad rows are one state, alike across samples: on the fit rows their peers must predict them
        # within the tolerance, else the rows are only "not the train row" (drift at early positions,
        # saturated values), which is no padding.
        judged = found & rows.fit
        if not judged.any():
            return None
        den = float(np.sum(b[judged] ** 2, dtype=np.float64))
        if den <= 0 or np.sqrt(np.sum((out[judged] - b[judged]) ** 2, dtype=np.float64) / den) > rows.tolerance:
            return None
        return out


EXPLANATION = ForeignRows()


# Not every pad row is flagged: at some positions a pad state lies within the tolerance of the real
# row (a trained 10-layer Llama, its last 11 rows padding: 7 flagged at HF[2], 4 at HF[5]), so a
# padded end is flagged at a density of 0.36 or more. Scattered rows (routing flips, at most 10% of
# tokens: explain/drift.py FLIP_MAX_FRACTION) flag the span from the first of them to the end at about
# their rate. A quarter lies between the two.
PADDING_DENSITY = 0.25


def _edge_runs(rows: ExplainRows, flagged: np.ndarray) -> np.ndarray:
    """Of the ``flagged`` rows, those of samples whose flagged rows sit at one end: at least
    PADDING_DENSITY of the rows from the first flagged one to the sample's last row read (right
    padding), or from its first row to the last flagged one (left padding), are flagged, and some row
    of the sample is not (the prompt's own rows)."""
    out = np.zeros(len(flagged), dtype=bool)
    for s in np.unique(rows.sample[flagged]):
        mine = np.flatnonzero(rows.sample == s)
        mine = mine[np.argsort(rows.position[mine], kind="stable")]
        marks = flagged[mine]
        if marks.all():
            continue
        where = np.flatnonzero(marks)
        tail = marks[where[0]:].mean()
        head = marks[: where[-1] + 1].mean()
        if max(tail, head) >= PADDING_DENSITY:
            out[mine[marks]] = True
    return out


def _source_rows(rows: ExplainRows, source_samples: list[int], flats: list[bool], mine: np.ndarray,
                 lengths: dict[int, int]) -> np.ndarray:
    """[candidates, rows]: for each (source sample, flat reading), the row each of rows ``mine`` is
    guessed from: the row of that source sample at the same position; where the source sample is
    shorter, the row itself (a request given the previous one's rows gets them for the positions the
    previous one had), or with the flat reading the next sample's row from its start (one flattened
    buffer read on); so every source is scored on the same rows."""
    source = np.asarray(source_samples)[:, None]
    position = np.broadcast_to(rows.position[mine], (len(source_samples), len(mine)))
    ends = np.array([lengths[int(t)] for t in source_samples])[:, None]
    past = np.asarray(flats)[:, None] & (position >= ends)
    found = rows.rows_at(np.where(past, source + 1, source), np.where(past, position - ends, position))
    return np.where(found >= 0, found, mine)

