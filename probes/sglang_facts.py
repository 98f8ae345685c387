"""What an SGLang server says about itself, and what the width of its hidden states then claims.

Read from sgl-project/sglang (2026 main) python/sglang/srt/entrypoints/http_server.py: ``GET
/server_info`` returns ``{**dataclasses.asdict(server_args), **scheduler_info, "internal_states":
[...], "version": __version__}``; ``/get_server_info`` is the older name (deprecated, still served).
The ServerArgs fields used here: model_path, dtype, quantization, speculative_algorithm,
speculative_draft_model_path, enable_return_hidden_states, return_hidden_states_mode,
disable_radix_cache, chunked_prefill_size.

Aux capture (conventions.SOURCES["sglang_aux_switch"]) is on only under ``--speculative-algorithm
EAGLE3`` (or DFLASH/DSPARK): then ``meta_info["hidden_states"]`` rows are the concatenation of the
aux states, k*H wide, in ascending layer order (the capture loop appends in layer order). Otherwise
they are the post-norm final state, H wide. The aux ids are the server's own ``--return-aux-hidden-state-layer-ids`` (0.5.23: with
``--enable-return-aux-hidden-states``, capture without a draft), else the draft model's config.json
``eagle_config.eagle_aux_hidden_state_layer_ids``; without either the target model's defaults apply.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Sequence

from alignprobe.conventions import map_layer_ids
from alignprobe.dump.schema import FINAL_NORM_POST, ROLE_DRAFTER_INPUT, StreamClaim
from alignprobe.conventions import SGLANG_FLAGS_FULL_ROWS
from alignprobe.errors import BadInput
from alignprobe.safe_json import local_config

AUX_ALGORITHMS = ("EAGLE3", "DFLASH", "DSPARK")
FLAG_HIDDEN_STATES = "--enable-return-hidden-states (or --return-hidden-states-mode full)"
FLAGS_FULL_ROWS = SGLANG_FLAGS_FULL_ROWS  # compare's short_rows finding names them too


@dataclasses.dataclass
class ServerFacts:
    """The facts of one SGLang server that matter for a capture; ``raw`` keeps what it sent."""

    version: str = ""
    model_path: str = ""
    dtype: str = ""
    quantization: str = ""
    speculative_algorithm: str = ""  # "" when speculative decoding is off
    draft_model_path: str = ""
    hidden_states_mode: str = ""  # "full", "last" or "" (off / not reported)
    radix_cache: bool | None = None  # None: not reported
    chunked_prefill_size: int | None = None
    # --enable-return-aux-hidden-states (0.5.23): aux capture without a draft; the server resets
    # speculative_algorithm to None and keeps the convention in aux_hidden_state_capture ("eagle3").
    aux_capture: str = ""
    aux_layer_ids: list[int] | None = None  # --return-aux-hidden-state-layer-ids, as the server ran with them
    endpoint: str = ""
    raw: dict[str, Any] = dataclasses.field(default_factory=dict)

    @classmethod
    def from_info(cls, info: dict[str, Any], endpoint: str = "") -> "ServerFacts":
        mode = info.get("return_hidden_states_mode")
        if not mode and info.get("enable_return_hidden_states"):
            mode = "full"  # the legacy flag is an alias of full (server_args._handle_return_hidden_states_mode)
        radix = info.get("disable_radix_cache")
        chunk = info.get("chunked_prefill_size")
        return cls(
            version=str(info.get("version", "") or ""),
            model_path=str(info.get("model_path", "") or ""),
            dtype=str(info.get("dtype", "") or ""),
            quantization=str(info.get("quantization", "") or ""),
            speculative_algorithm=str(info.get("speculative_algorithm", "") or "").upper(),
            draft_model_path=str(info.get("speculative_draft_model_path", "") or ""),
            hidden_states_mode=str(mode or ""),
            radix_cache=None if radix is None else not bool(radix),
            chunked_prefill_size=int(chunk) if isinstance(chunk, int) and not isinstance(chunk, bool) else None,
            aux_capture=str(info.get("aux_hidden_state_capture") or "").upper(),
            aux_layer_ids=_int_list(info.get("return_aux_hidden_state_layer_ids")),
            endpoint=endpoint,
            raw=info,
        )

    @property
    def hidden_states_reported_off(self) -> bool:
        """True when the server says outright that full hidden states are not allowed."""
        if "enable_return_hidden_states" not in self.raw and "return_hidden_states_mode" not in self.raw:
            return False  # an older server that does not report it: the first request will tell
        return self.hidden_states_mode != "full"

    @property
    def aux_capture_expected(self) -> bool:
        return self.speculative_algorithm in AUX_ALGORITHMS or self.aux_capture in AUX_ALGORITHMS

    def full_row_risks(self) -> list[str]:
        """Server settings under which a prefill can come back with fewer rows than the prompt."""
        risks = []
        if self.radix_cache:
            risks.append("the radix (prefix) cache is on")
        if self.chunked_prefill_size is not None and self.chunked_prefill_size > 0:
            risks.append(f"chunked prefill is on (chunk {self.chunked_prefill_size} tokens)")
        return risks

    def summary(self) -> dict[str, Any]:
        return {k: v for k, v in dataclasses.asdict(self).items() if k != "raw"}


def _int_list(value: Any) -> list[int] | None:
    if isinstance(value, list) and all(isinstance(i, int) and not isinstance(i, bool) for i in value):
        return [int(i) for i in value]
    return None


@dataclasses.dataclass(frozen=True)
class ModelFacts:
    """The target model's shape and family, from its config.json or the user."""

    num_layers: int
    hidden_size: int
    arch: str = "llama"  # config model_type: picks SGLang's model file (llama.py or deepseek_v2.py)
    torch_dtype: str = ""
    source: str = ""


def model_facts_from_config(config: dict[str, Any], source: str) -> ModelFacts | None:
    text = config.get("text_config") if isinstance(config.get("text_config"), dict) else config
    try:
        n, h = int(text["num_hidden_layers"]), int(text["hidden_size"])
    except (KeyError, TypeError, ValueError):
        return None
    arch = str(text.get("model_type") or config.get("model_type") or "llama")
    return ModelFacts(n, h, arch, str(text.get("torch_dtype") or text.get("dtype") or ""), source)


def draft_aux_layer_ids(draft_model_path: str) -> list[int] | None:
    """``eagle_config.eagle_aux_hidden_state_layer_ids`` of a local draft model, as SGLang's model_runner reads it."""
    config = local_config(draft_model_path)
    if config is None:
        return None
    eagle = config.get("eagle_config")
    ids = eagle.get("eagle_aux_hidden_state_layer_ids") if isinstance(eagle, dict) else None
    if ids is None:
        return None
    if not isinstance(ids, list) or not all(isinstance(i, int) for i in ids):
        raise BadInput(f"{draft_model_path}/config.json: eagle_aux_hidden_state_layer_ids is not a list of integers")
    return ids


@dataclasses.dataclass(frozen=True)
class WidthClaim:
    """What the width of the returned rows claims, in HF-index terms, and why."""

    claim: StreamClaim
    width: int
    meaning: str  # one line for provenance and the user
    layer_ids: tuple[int, ...] | None  # the SGLang ids behind an aux claim


def claim_for_width(
    width: int,
    model: ModelFacts,
    facts: ServerFacts,
    layer_ids: Sequence[int] | None,
    dtype: str,
    *,
    sglang_first_id_rule: bool = True,
) -> WidthClaim:
    """The claim a row of ``width`` numbers makes: H = post-norm final state, k*H = k aux states."""
    n, h = model.num_layers, model.hidden_size
    if width <= 0 or width % h:
        raise BadInput(
            f"the server returned rows {width} wide, which is not a multiple of the hidden size {h}: "
            "check --hidden-size (or the model's config.json) matches the served model"
        )
    k = width // h
    algo = facts.speculative_algorithm or (f"none, aux capture {facts.aux_capture}" if facts.aux_capture else "none")
    if k == 1:
        why = (
            "although the server reports EAGLE3: check the draft config's use_aux_hidden_state"
            if facts.aux_capture_expected
            else f"speculative algorithm {algo}; only EAGLE3 captures aux states"
        )
        meaning = f"width {width} = H: the post-norm final state HF[{n}]; EAGLE-3 aux capture is off ({why})"
        claim = StreamClaim((n,), h, n, dtype, FINAL_NORM_POST, ROLE_DRAFTER_INPUT, meaning)
        return WidthClaim(claim, width, meaning, None)
    explicit = layer_ids is not None
    if not explicit and k != 3:
        raise BadInput(
            f"the server returned {k} aux states ({width} wide) but no layer ids are known: "
            "pass --layer-ids with the drafter's eagle_aux_hidden_state_layer_ids"
        )
    mapping = map_layer_ids(
        "sglang", layer_ids, n, arch=model.arch, explicit=explicit, sglang_first_id_rule=sglang_first_id_rule
    )
    if len(mapping.hf_indices) != k:
        raise BadInput(
            f"the server returned {k} aux states ({width} wide) but the layer ids {list(mapping.layer_ids)} "
            f"name {len(mapping.hf_indices)}: pass the drafter's eagle_aux_hidden_state_layer_ids with --layer-ids"
        )
    # SGLang appends aux states in layer order, whatever order the config lists the ids in.
    hf = tuple(sorted(mapping.hf_indices))
    meaning = (
        f"width {width} = {k}*H: concat of aux states, SGLang ids {list(mapping.layer_ids)} -> HF{list(hf)} "
        f"({mapping.rule})"
    )
    claim = StreamClaim(hf, h, n, dtype, FINAL_NORM_POST, ROLE_DRAFTER_INPUT, meaning)
    return WidthClaim(claim, width, meaning, mapping.layer_ids)
