"""Run a GGUF model through llama.cpp (llama-cpp-python) and keep its hidden states; runs in llama.cpp's Python.

    python alignprobe_llamacpp_driver.py REQUEST.json RESULT.json

REQUEST: ``{"model": GGUF path, "prompts": [[token ids], ...], "layer_inputs": "all" or "aux", "aux_ids",
"out_dir", "threads", "cache_type", "flash_attn", "drafter"}``: the inputs of every layer, or of the aux ids
below n_layer. ``drafter``: an EAGLE-3 drafter GGUF whose ids llama.cpp itself reads (loaded as a model:
``llama_model_target_layer_ids``), used in place of ``aux_ids``.
RESULT: ``{"files": [one .npz per prompt, in order], "layer_inputs": [the ids kept], "n_layer", "n_embd",
"n_vocab", "architecture", "file_type", "description", "bindings_version", "start_s", "decode_s", "drafter":
{"architecture", "layer_ids", "target_hidden_size"} or null}``, or
``{"error": "one line"}``.

Each .npz holds ``layer_inputs [S, len(ids), n_embd]`` (float32), ``prenorm [S, n_embd]``,
``postnorm [S, n_embd]``, ``nextn [S, n_embd]`` (or ``[0, n_embd]`` when not asked for) and
``token_ids [S]``. Where each comes from, in the vendored llama.cpp
(ggml-org/llama.cpp 0c1e5709, llama-cpp-python 0.3.36):

- ``layer_inputs``: llama.cpp's own EAGLE-3 feature API, ``llama_set_embeddings_layer_inp(ctx, il,
  true)`` before decoding and ``llama_get_embeddings_layer_inp(ctx, il)`` after (src/llama-ext.h;
  common/speculative.cpp feeds the drafter's fc with them). The graph records ``t_layer_inp[il] =
  inpL`` at the top of layer il (src/models/llama.cpp), so id il is the input of layer il. The
  bindings wrap neither function (llama_cpp_ext.py binds only the nextn ones): bound here with
  ctypes on the same shared library, by their C++ symbol names (llama-ext.h is not extern "C").
- ``prenorm``: the graph tensor ``l_out-{n_layer-1}`` (the last layer's output, before the final
  norm) seen through the scheduler's eval callback (``cb_eval`` in llama_context_params). The
  feature API has no id for it on a Llama target: ``set_embeddings_layer_inp`` accepts il =
  n_layer, but no Llama graph tensor is recorded there (the graph asserts on it), and the nextn
  state is built only by the models that set it (src/models/openai-moe.cpp, deepseek2.cpp, ...).
- ``postnorm``: ``llama_get_embeddings`` with embeddings on and no pooling: ``result_norm``.
- ``nextn`` (only when n_layer is an aux id): what EAGLE-3 reads for id n_layer,
  ``llama_get_embeddings_nextn`` after ``llama_set_embeddings_nextn(ctx, true, false)``
  (common/speculative.cpp). On a Llama target it is a buffer of zeros: src/models/llama.cpp never
  sets ``t_h_nextn``, and speculative.cpp checks only for a null pointer (measured here).

Every token is an output (batch logits all on), so the last layer runs on every row. Imports only
llama_cpp, numpy and the standard library: never alignprobe.
"""

import ctypes
import os
import sys
import time

# llama-ext.h declares its functions without extern "C": the Itanium C++ names (Linux, macOS) first.
SET_LAYER_INP = ("_Z30llama_set_embeddings_layer_inpP13llama_contextjb", "llama_set_embeddings_layer_inp")
GET_LAYER_INP = ("_Z30llama_get_embeddings_layer_inpP13llama_contextj", "llama_get_embeddings_layer_inp")
TARGET_IDS = ("_Z28llama_model_target_layer_idsPK11llama_model", "llama_model_target_layer_ids")
TARGET_IDS_N = ("_Z30llama_model_target_layer_ids_nPK11llama_model", "llama_model_target_layer_ids_n")
GGML_TYPE_F32 = 0
# the KV cache's element type (type_k, type_v), as llama.cpp's --cache-type-k / --cache-type-v name them
CACHE_TYPES = {"f32": 0, "f16": 1, "bf16": 30, "q8_0": 8}
# llama_flash_attn_type, as llama.cpp's --flash-attn names it
FLASH_ATTN = {"auto": -1, "off": 0, "on": 1}


class _TensorHead(ctypes.Structure):
    # the first fields of struct ggml_tensor (ggml/include/ggml.h): enough for the type and shape
    _fields_ = [("type", ctypes.c_int), ("buffer", ctypes.c_void_p), ("ne", ctypes.c_int64 * 4),
                ("nb", ctypes.c_size_t * 4)]


def _symbol(lib, names, argtypes, restype):
    for name in names:
        func = getattr(lib, name, None)
        if func is not None:
            func.argtypes, func.restype = argtypes, restype
            return func
    raise RuntimeError(f"this llama.cpp build exports none of {', '.join(names)}: it predates the layer-input API")


class PrenormWatch:
    """The eval callback: keeps the rows of one named graph tensor each time the graph computes it."""

    def __init__(self, llama_cpp, libggml, name, n_embd):
        self.name, self.n_embd, self.rows = name.encode(), n_embd, []
        self._get_name = libggml.ggml_get_name
        self._get_name.argtypes, self._get_name.restype = [ctypes.c_void_p], ctypes.c_char_p
        self._tensor_get = libggml.ggml_backend_tensor_get
        self._tensor_get.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_size_t]
        self._tensor_get.restype = None
        self.callback = llama_cpp.ggml_backend_sched_eval_callback(self._observe)
        self.error = None

    def _observe(self, tensor, ask, user_data):
        if self._get_name(tensor) != self.name:
            return not ask  # ask: not wanted; a computed tensor: carry on
        if ask:
            return True
        import numpy as np

        head = ctypes.cast(tensor, ctypes.POINTER(_TensorHead)).contents
        rows, width = int(head.ne[1]), int(head.ne[0])
        if head.type != GGML_TYPE_F32 or width != self.n_embd or head.ne[2] != 1 or head.ne[3] != 1:
            self.error = f"{self.name.decode()} is type {head.type} of shape {list(head.ne)}, not F32 [{self.n_embd}, S]"
            return True
        out = np.empty((rows, width), dtype=np.float32)
        self._tensor_get(tensor, out.ctypes.data, 0, out.nbytes)
        self.rows.append(out)
        return True

    def take(self):
        import numpy as np

        if self.error:
            raise RuntimeError(self.error)
        rows, self.rows = self.rows, []
        return np.concatenate(rows) if rows else None


def drafter_taps(llama_cpp, path):
    """What llama.cpp reads from a drafter GGUF: its architecture, target layer ids (``eagle3.target_layers``,
    ``eagle3.extract_layers`` in older files) and their width (``eagle3.target_hidden_size``)."""
    lib = llama_cpp.llama_cpp._lib
    ids_n = _symbol(lib, TARGET_IDS_N, [llama_cpp.llama_model_p_ctypes], ctypes.c_uint32)
    ids_of = _symbol(lib, TARGET_IDS, [llama_cpp.llama_model_p_ctypes], ctypes.POINTER(ctypes.c_int32))
    model = llama_cpp.llama_model_load_from_file(path.encode(), llama_cpp.llama_model_default_params())
    if not model:
        raise RuntimeError(f"llama.cpp could not load the drafter {path} (see the log above)")
    try:
        arch, count = _meta(llama_cpp, model, "general.architecture"), ids_n(model)
        if not count:
            raise ValueError(f"the drafter {path} ({arch}) declares no target layers: not an EAGLE-3 drafter GGUF")
        pointer = ids_of(model)
        ids = [int(pointer[i]) for i in range(count)]
        width_text = _meta(llama_cpp, model, f"{arch}.target_hidden_size")
        width = int(width_text) if width_text.isdigit() else None
    finally:
        llama_cpp.llama_model_free(model)
    return {"architecture": arch, "layer_ids": ids, "target_hidden_size": width}


def _meta(llama_cpp, model, key):
    buf = ctypes.create_string_buffer(256)
    n = llama_cpp.llama_model_meta_val_str(model, key.encode(), buf, len(buf))
    return buf.value.decode("utf-8", "replace") if n >= 0 else ""


def _quiet(llama_cpp):
    # llama.cpp logs every tensor it loads; keep errors only (they go to the engine log)
    @llama_cpp.llama_log_callback
    def log(level, text, user_data):
        if level == llama_cpp.GGML_LOG_LEVEL_ERROR:
            sys.stderr.write(text.decode("utf-8", "replace"))

    llama_cpp.llama_log_set(log, None)
    return log  # keep a reference: llama.cpp calls it later


def run(request):
    import numpy as np
    import llama_cpp
    from llama_cpp import _ggml

    keep_log = _quiet(llama_cpp)  # noqa: F841 - held for the callback's lifetime
    started = time.monotonic()
    llama_cpp.llama_backend_init()
    model = llama_cpp.llama_model_load_from_file(request["model"].encode(), llama_cpp.llama_model_default_params())
    if not model:
        raise RuntimeError(f"llama.cpp could not load {request['model']} (see the log above)")
    n_layer, n_embd = llama_cpp.llama_model_n_layer(model), llama_cpp.llama_model_n_embd(model)
    n_vocab = llama_cpp.llama_vocab_n_tokens(llama_cpp.llama_model_get_vocab(model))
    drafter = drafter_taps(llama_cpp, request["drafter"]) if request.get("drafter") else None
    if drafter and drafter["target_hidden_size"] not in (None, n_embd):
        raise ValueError(f"the drafter reads target states {drafter['target_hidden_size']} wide, this target's are "
                         f"{n_embd}: it was made for another target")
    aux = drafter["layer_ids"] if drafter else [int(i) for i in request.get("aux_ids") or ()]
    bad = [i for i in aux if not 0 <= i <= n_layer]
    if bad:
        raise ValueError(f"layer ids {bad} are outside 0..{n_layer} for this {n_layer}-layer model")
    ids = list(range(n_layer)) if request["layer_inputs"] == "all" else sorted({i for i in aux if i < n_layer})
    prompts = request["prompts"]
    longest = max(len(p) for p in prompts)
    n_ctx_train = llama_cpp.llama_model_n_ctx_train(model)
    for index, tokens in enumerate(prompts):
        if not all(0 <= int(t) < n_vocab for t in tokens):
            raise ValueError(f"prompt {index} holds token ids outside the model's vocabulary of {n_vocab}")
        if n_ctx_train > 0 and len(tokens) > n_ctx_train:
            raise ValueError(f"prompt {index} has {len(tokens)} tokens, more than the model's context of {n_ctx_train}")
    lib = llama_cpp.llama_cpp._lib
    set_layer_inp = _symbol(lib, SET_LAYER_INP, [llama_cpp.llama_context_p_ctypes, ctypes.c_uint32, ctypes.c_bool], None)
    get_layer_inp = _symbol(lib, GET_LAYER_INP, [llama_cpp.llama_context_p_ctypes, ctypes.c_uint32],
                            ctypes.POINTER(ctypes.c_float))

    watch = PrenormWatch(llama_cpp, _ggml.libggml, f"l_out-{n_layer - 1}", n_embd)
    params = llama_cpp.llama_context_default_params()
    params.n_ctx = params.n_batch = params.n_ubatch = longest  # one prompt, one ubatch
    params.n_seq_max = 1
    params.embeddings = True
    params.pooling_type = llama_cpp.LLAMA_POOLING_TYPE_NONE
    params.n_threads = params.n_threads_batch = int(request.get("threads") or os.cpu_count() or 1)
    params.type_k = params.type_v = CACHE_TYPES[request.get("cache_type") or "f16"]
    params.flash_attn_type = FLASH_ATTN[request.get("flash_attn") or "auto"]
    params.cb_eval = watch.callback
    params.cb_eval_user_data = None
    ctx = llama_cpp.llama_init_from_model(model, params)
    if not ctx:
        raise RuntimeError("llama.cpp could not create a context (see the log above)")
    for il in ids:
        set_layer_inp(ctx, il, True)
    want_nextn = n_layer in aux
    if want_nextn:
        from llama_cpp import llama_cpp_ext

        llama_cpp_ext.llama_set_embeddings_nextn(ctx, True, False)  # as speculative.cpp sets it for id n_layer
    start_s = time.monotonic() - started

    started = time.monotonic()
    files = []
    batch = llama_cpp.llama_batch_init(longest, 0, 1)
    try:
        for index, tokens in enumerate(prompts):
            llama_cpp.llama_memory_clear(llama_cpp.llama_get_memory(ctx), True)
            n = len(tokens)
            batch.n_tokens = n
            for i, token in enumerate(tokens):
                batch.token[i], batch.pos[i], batch.n_seq_id[i] = int(token), i, 1
                batch.seq_id[i][0], batch.logits[i] = 0, True
            code = llama_cpp.llama_decode(ctx, batch)
            if code != 0:
                raise RuntimeError(f"llama_decode returned {code} for prompt {index} ({n} tokens)")
            layers = np.stack([np.ctypeslib.as_array(get_layer_inp(ctx, il), shape=(n, n_embd)).copy() for il in ids],
                              axis=1) if ids else np.zeros((n, 0, n_embd), dtype=np.float32)
            postnorm = np.ctypeslib.as_array(llama_cpp.llama_get_embeddings(ctx), shape=(n, n_embd)).copy()
            nextn = np.zeros((0, n_embd), dtype=np.float32)
            if want_nextn:
                from llama_cpp import llama_cpp_ext

                pointer = llama_cpp_ext.llama_get_embeddings_nextn(ctx)
                if not pointer:
                    raise RuntimeError(f"llama_get_embeddings_nextn gave no buffer: EAGLE-3 id {n_layer} would abort")
                nextn = np.ctypeslib.as_array(pointer, shape=(n, n_embd)).copy()
            prenorm = watch.take()
            if prenorm is None or prenorm.shape != (n, n_embd):
                got = None if prenorm is None else list(prenorm.shape)
                raise RuntimeError(f"the graph tensor l_out-{n_layer - 1} gave {got} rows for {n} tokens")
            path = os.path.join(request["out_dir"], f"{index:06d}.npz")
            np.savez(path, layer_inputs=layers, prenorm=prenorm, postnorm=postnorm, nextn=nextn,
                     token_ids=np.asarray(tokens, dtype=np.int64))
            files.append(path)
    finally:
        llama_cpp.llama_batch_free(batch)
        llama_cpp.llama_free(ctx)
    decode_s = time.monotonic() - started
    result = {"files": files, "layer_inputs": ids, "n_layer": n_layer, "n_embd": n_embd, "n_vocab": n_vocab,
              "architecture": _meta(llama_cpp, model, "general.architecture"),
              "file_type": _meta(llama_cpp, model, "general.file_type"), "description": _description(llama_cpp, model),
              "bindings_version": llama_cpp.__version__, "start_s": start_s, "decode_s": decode_s, "drafter": drafter}
    llama_cpp.llama_model_free(model)
    return result


def _description(llama_cpp, model):
    buf = ctypes.create_string_buffer(256)
    llama_cpp.llama_model_desc(model, buf, len(buf))
    return buf.value.decode("utf-8", "replace")


def main():
    from alignprobe_driver_io import serve  # beside this file: the script's folder is first on sys.path

    serve(run)

if __name__ == "__main__":
    main()
