"""What the diagnosis tests read off a CompareResult, in one place for every suite."""

# causes of another kind than a checkpoint or numeric difference: naming any of them where the case is
# none sends a team the wrong way
STATE_CAUSES = {"row_shift", "foreign_rows", "layer_offset", "wrong_taps", "channel_scale", "rotated", "dtype_misread",
                "residual_split", "duplicate_tap", "scale_mismatch", "channels_permuted", "saturated"}


def above_info(r):
    """The codes of the findings at warn or error, in order."""
    return [f.code for f in r.findings if f.severity != "info"]


def winners(r, stream=None):
    """Each explained slice's winning explanation (of one serve stream, if given)."""
    return [e.winner.name for e in r.explanations if stream is None or e.serve_stream == stream]
