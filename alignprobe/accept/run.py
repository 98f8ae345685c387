"""``alignprobe.accept(drafter, train_dump, serve_dump)``: the accept length each side would give.

Pipeline: load the drafter (SpecForge or speculators layout), borrow the target's embedding / LM
head when the drafter lacks them, check the drafter against the dumps (findings), then run the
drafter's chain on each dump's drafter-input states and tally acceptance per draft position.

What "accepted" means: greedy, draft step j at chain start t is accepted when its top-1 (mapped
through d2t) equals the dump's token x[t+j+1]. With the target's LM head and the train dump's
post-norm final state at hand, chain starts are kept only where the dump's tokens are the target's
own greedy choices (x[i+1] = argmax of the target at i, for i = t..t+k): the positions a greedy
engine drafts at (a generated continuation, not a prompt the target would not have written).
With ``temperature > 0`` the dumps are to hold text sampled at that temperature (the engine drafts
on the text it sampled): every start from ``score_from`` is walked, no greedy mask, a draft counts
when the dump's token equals it (vLLM's one-hot rejection sampler accepts exactly then: chain.py
EngineWalk), and with the LM head the expected acceptance p_T(draft) at the same starts is kept
beside it, with p from that dump's own post-norm final state.
"""

from __future__ import annotations

import os
import time

import numpy as np

from alignprobe.accept.chain import ChainTally, EngineWalk, conditional_rates, draft_acceptance
from alignprobe.accept.checkpoint import DrafterCheckpoint, load_drafter
from alignprobe.accept.checks import check_drafter, unrunnable_width
from alignprobe.accept.result import AcceptResult, SideAccept
from alignprobe.dump import FINAL_NORM_POST, ROLE_DRAFTER_INPUT, ROLE_FINAL, open_dump
from alignprobe.errors import BadInput
from alignprobe.findings import SEVERITY_RANK, render, sort_findings

# Below 1 in 10 chain starts on the target's own tokens, the mask would leave too little to score.
MIN_OWN_SHARE_INVERSE = 10

# The compare findings that change what the drafter is fed, most telling first.
EXPLAINING_CODES = ("width_mismatch", "token_shift", "layer_offset", "wrong_taps", "final_norm_mismatch",
                    "scale_mismatch", "nonfinite", "numeric_drift")


def accept(drafter: str | os.PathLike | DrafterCheckpoint, train_dump, serve_dump=None, *, target=None,
           num_draft_tokens: int = 3, temperature: float = 0.0, max_tokens: int | None = None,
           device: str = "cpu", compare_result=None, explain: bool = True, score_from: int = 0) -> AcceptResult:
    """Predict the accept length of ``drafter`` on the train dump and on the serve dump.

    ``target``: the target model folder (its embedding, LM head, vocab size are read from the
    safetensors alone); needed when the drafter carries no embedding. ``compare_result``: a
    CompareResult of the same pair, else one is computed when ``explain`` (to name the finding
    behind a loss and the measured taps). ``max_tokens`` caps the token rows run per side.
    ``score_from``: chain starts before this position of each sample are not scored (the drafter still
    reads them): with dumps of prompt + generated text, the prompt length minus 1 scores where a
    serving engine drafts, from the first generated token on.
    """
    from alignprobe.accept.drafter import Eagle3Drafter, WidthError
    from alignprobe.accept.target_weights import read_target_weights

    started = time.perf_counter()
    if num_draft_tokens < 1:
        raise BadInput(f"num_draft_tokens {num_draft_tokens}: draft at least 1 token")
    if temperature < 0:
        raise BadInput(f"temperature {temperature}: must be 0 (greedy) or positive")
    ckpt = drafter if isinstance(drafter, DrafterCheckpoint) else load_drafter(drafter)
    weights = read_target_weights(target) if target is not None else None
    embed = ckpt.weights.get("embed_tokens.weight")
    if embed is None:
        if weights is None or weights.embed is None:
            raise BadInput(f"--drafter {ckpt.path}: the drafter carries no embed_tokens.weight; give --target DIR "
                           "(the target model folder) so its embedding is read from the safetensors")
        embed = weights.embed
    lm_head = weights.lm_head if weights is not None else None
    notes: list[str] = []

    with open_dump(train_dump) as train:
        train_stream = _drafter_stream(train, ckpt, "train")
        hidden = train.streams[train_stream].hidden_size
        num_layers = train.streams[train_stream].num_layers
        if temperature > 0:
            # Sampled text is not the target's greedy choice: the engine drafts at every start.
            own = None
            notes.append(f"temperature {temperature:g}: every chain start is walked; the dumps should hold text sampled "
                         "at this temperature (the engine drafts on the text it sampled)")
        else:
            own = _own_token_masks(train, lm_head, num_draft_tokens, notes)
        serve = open_dump(serve_dump) if serve_dump is not None else None
        try:
            if compare_result is None and explain and serve is not None:
                import alignprobe.compare as compare_module

                compare_result = compare_module.compare(train_dump, serve_dump)
            serve_stream = _drafter_stream(serve, ckpt, "serve") if serve is not None else None
            measured = _measured(compare_result, serve_stream)
            findings = check_drafter(
                ckpt, hidden_size=hidden, num_layers=num_layers,
                serve_claim=serve.streams[serve_stream] if serve is not None else None,
                serve_engine=(serve.provenance.engine if serve is not None else ""), measured=measured,
                target_vocab=(weights.vocab_size if weights is not None else None) or (int(lm_head.shape[0]) if lm_head is not None else None))
            if any(f.code in ("drafter_hidden_width", "drafter_vocab_map", "drafter_target_vocab") and f.severity == "error" for f in findings):
                return AcceptResult(ckpt.path, ckpt.layout, num_draft_tokens, None, None, findings,
                                    notes=notes + ["the drafter cannot run on these dumps: nothing predicted"],
                                    elapsed_s=time.perf_counter() - started)
            model = Eagle3Drafter(ckpt, embed, device=device)
            sides = {}
            for name, dump, stream in (("train", train, train_stream), ("serve", serve, serve_stream)):
                if dump is None:
                    sides[name] = None
                    continue
                try:
                    sides[name] = _run_side(model, dump, stream, own, lm_head, num_draft_tokens, temperature, max_tokens, train,
                                            score_from)
                except WidthError as exc:
                    findings.append(unrunnable_width(name, stream, dump.streams[stream].width, ckpt.fc_input_width,
                                                     str(exc), _final_kept_apart(dump, stream, ckpt)))
                    sides[name] = None
        finally:
            if serve is not None:
                serve.close()
    result = AcceptResult(ckpt.path, ckpt.layout, num_draft_tokens, sides["train"], sides["serve"],
                          sort_findings(findings), notes=notes)
    if compare_result is not None:
        _explain(result, compare_result)
    result.elapsed_s = time.perf_counter() - started
    return result


def _drafter_stream(dump, ckpt: DrafterCheckpoint, side: str) -> str:
    """The stream an engine would feed the drafter: the drafter-input one (fc wide first), else the final state."""
    inputs = [n for n, c in dump.streams.items() if c.role == ROLE_DRAFTER_INPUT]
    inputs.sort(key=lambda n: (dump.streams[n].width != ckpt.fc_input_width, n))
    if inputs:
        return inputs[0]
    finals = [n for n, c in dump.streams.items() if c.role == ROLE_FINAL]
    if finals:
        return finals[0]
    raise BadInput(f"{side} dump {dump.path}: no drafter-input or final stream to feed the drafter "
                   f"(streams: {', '.join(dump.streams) or 'none'})")


def _final_kept_apart(dump, stream: str, ckpt: DrafterCheckpoint) -> bool:
    """The drafter-input stream is one slice short of fc and the dump holds HF[N] pre-norm apart."""
    claim = dump.streams[stream]
    return claim.width + claim.hidden_size == ckpt.fc_input_width and any(
        c.role == ROLE_FINAL and c.hf_indices == (c.num_layers,) and c.final_norm != FINAL_NORM_POST
        for c in dump.streams.values())


def _measured(compare_result, serve_stream: str | None) -> list[str | None] | None:
    """What each serve slice measured as: the explanations' word where they name a tap (the mapping
    search only sees the train side's slices: against a train dump of three layers its nearest one is
    no measurement), None where nothing fits, else the mapping's best match."""
    if compare_result is None or serve_stream is None:
        return None
    for search in compare_result.mappings:
        if search.serve_stream == serve_stream:
            out: list[str | None] = list(search.measured)
            for e in compare_result.explanations:
                if e.serve_stream != serve_stream or e.serve_slice >= len(out):
                    continue
                if e.winner.name == "index_offset":
                    out[e.serve_slice] = e.winner.params.get("measured", out[e.serve_slice])
                elif e.winner.name == "identity":
                    out[e.serve_slice] = e.label
                elif e.winner.name == "nothing_fits":
                    out[e.serve_slice] = None
            return out
    return None


def _own_token_masks(train, lm_head, steps: int, notes: list[str]) -> dict[str, np.ndarray] | None:
    """Per train sample: chain starts t whose tokens x[t+1..t+k+1] are the target's greedy choices."""
    if lm_head is None:
        notes.append("no target LM head (--target): every chain start is scored, prompt tokens included")
        return None
    finals = [n for n, c in train.streams.items() if c.role == ROLE_FINAL and c.final_norm == FINAL_NORM_POST and c.width == lm_head.shape[1]]
    if not finals:
        notes.append("the train dump has no post-norm final state: every chain start is scored")
        return None
    import torch

    masks = {}
    for i, sid in enumerate(train.sample_ids):
        tokens = train.token_ids(i)
        greedy = (torch.from_numpy(train.states(i, finals[0])) @ lm_head.T).argmax(-1).numpy()
        own = tokens[1:] == greedy[:-1]  # own[i]: x[i+1] is the target's choice at i
        starts = len(tokens) - steps - 1
        if starts <= 0:
            masks[sid] = np.zeros(0, dtype=bool)
            continue
        window = np.lib.stride_tricks.sliding_window_view(own, steps + 1)[:starts]
        masks[sid] = window.all(axis=1)
    kept = sum(int(m.sum()) for m in masks.values())
    total = sum(len(m) for m in masks.values())
    if kept * MIN_OWN_SHARE_INVERSE < total:
        # A prompt set the target would not have written: no greedy engine drafts there, but
        # scoring nothing helps no one; say so and score all.
        notes.append(f"only {kept} of {total} chain starts continue with the target's own greedy tokens: every start is scored")
        return None
    notes.append(f"scored {kept} of {total} chain starts: those whose next {steps + 1} tokens are the target's own greedy choices")
    return masks


def _run_side(model, dump, stream, own, lm_head, steps, temperature, max_tokens, train, score_from=0) -> SideAccept:
    import torch

    claim = dump.streams[stream]
    greedy = ChainTally(steps)
    walk = EngineWalk(steps)
    final = None
    if temperature > 0 and lm_head is not None:
        finals = [n for n, c in dump.streams.items() if c.role == ROLE_FINAL and c.final_norm == FINAL_NORM_POST and c.width == lm_head.shape[1]]
        final = finals[0] if finals else None
    notes = []
    columns = None
    taps = model.ckpt.num_taps
    if len(claim.hf_indices) == taps + 1 and claim.hf_indices[-1] == claim.num_layers and claim.width == model.ckpt.fc_input_width + claim.hidden_size:
        # speculators / extract_hidden_states files: the aux taps, then the final state the engine does not feed
        columns = slice(0, model.ckpt.fc_input_width)
        notes.append(f"{stream}: the last slice ({claim.slice_label(taps)}) is the final state, not fed to fc: left out")
    rows = samples = 0
    for i, sid in enumerate(dump.sample_ids):
        if max_tokens is not None and rows >= max_tokens:
            break
        tokens = torch.from_numpy(dump.token_ids(i).astype(np.int64))
        states = torch.from_numpy(dump.states(i, stream))
        if columns is not None:
            states = states[:, columns]
        rows += len(tokens)
        logits = model.chain_logits(tokens, states, steps)
        if not logits:
            continue
        length = logits[0].shape[0]
        keep = _keep(own, sid, dump, train, i, length)
        if score_from > 0:
            keep = (np.ones(length, dtype=bool) if keep is None else keep.copy())
            keep[:score_from] = False
        if keep is not None and not keep.any():
            continue
        samples += 1
        labels = torch.stack([tokens[j + 1 : j + 1 + length] for j in range(1, steps + 1)])
        drafted = torch.stack([model.to_target_ids(step_logits.argmax(-1)) for step_logits in logits]).cpu()
        correct = drafted == labels
        probability = None
        if final is not None:
            # Step j drafts at position t+j, where the target's logits come from its state at t+j.
            target_logits = torch.from_numpy(dump.states(i, final)) @ lm_head.T
            probability = torch.stack([draft_acceptance(drafted[j - 1], target_logits[j : j + length], temperature)
                                       for j in range(1, steps + 1)])
        walk.add(correct, keep, probability=probability)
        accepted = correct.double()
        if keep is not None:
            accepted = accepted[:, torch.from_numpy(keep)]
        greedy.add(accepted)
    if greedy.starts == 0:
        notes.append("no chain start could be scored (samples shorter than the draft chain)")
    return SideAccept(
        dump=str(dump.path), stream=stream, hf_indices=list(claim.hf_indices),
        fed="fc over the aux concat" if (claim.width == model.ckpt.fc_input_width or columns is not None) else "H-wide state, fc skipped",
        starts=greedy.starts, samples=samples, per_position=walk.per_position, conditional=conditional_rates(walk.per_position),
        top1=greedy.top1_rate, accept_length=walk.accept_length, drafts=walk.drafts,
        all_starts_per_position=greedy.per_position, all_starts_accept_length=greedy.accept_length, temperature=temperature,
        sampled_per_position=walk.expected_per_position if final is not None else None,
        sampled_accept_length=walk.expected_accept_length if final is not None else None, notes=notes)


def _keep(own, sid, dump, train, index, length):
    """The own-token mask for this sample, when the train dump has the same tokens for it."""
    if own is None or sid not in own:
        return None
    mask = own[sid]
    if dump is not train:
        j = train.index_of(sid) if sid in own else None
        if j is None or not np.array_equal(train.token_ids(j), dump.token_ids(index)):
            return None
    return mask[:length] if len(mask) >= length else None


def _explain(result: AcceptResult, compare_result) -> None:
    if result.train is None or result.serve is None:
        return
    ranked = [f for f in compare_result.findings if f.code in EXPLAINING_CODES and f.severity != "info"]
    ranked.sort(key=lambda f: (-SEVERITY_RANK[f.severity], EXPLAINING_CODES.index(f.code)))
    if ranked:
        result.explained_by, result.explanation = ranked[0].code, render.title(ranked[0])
