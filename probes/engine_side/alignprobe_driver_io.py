"""The engine side of probes/engine_process.py's protocol, shared by every driver here.

A driver is started as ``python DRIVER request.json result.json`` in the engine's own Python. It reads
the request, runs, and writes a JSON result: the run's, or ``{"error": one line}`` when the engine
failed (the traceback goes to the engine log). The exit code says which. Standard library only: this
runs beside the engine, never beside alignprobe.
"""

import json
import sys
import traceback


def serve(run, prepare=None):
    """Answer the request named on the command line with ``run(request)``; ``prepare(request)`` runs
    first, outside the error capture (a failure there is a crash of the driver, not of the engine)."""
    request_path, result_path = sys.argv[1], sys.argv[2]
    with open(request_path, encoding="utf-8") as fh:
        request = json.load(fh)
    if prepare is not None:
        prepare(request)
    try:
        result = run(request)
    except BaseException as exc:  # noqa: BLE001 - the engine's failure, reported to alignprobe as one line
        traceback.print_exc()
        lines = str(exc).strip().splitlines()
        result = {"error": f"{type(exc).__name__}: {lines[0] if lines else ''}".rstrip(": ")}
    with open(result_path, "w", encoding="utf-8") as fh:
        json.dump(result, fh)
    sys.exit(1 if "error" in result else 0)
