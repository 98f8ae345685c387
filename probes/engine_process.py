"""Run an engine-side driver (probes/engine_side/) in the engine's own Python, as a subprocess.

vLLM and SGLang pin their own torch, so they usually live in a venv apart from alignprobe's; the
driver is the only code of ours that runs there. It gets a JSON request and writes a JSON result;
the engine's log goes to ``engine.log`` in the work folder. Whatever the engine does (a Python error,
a crash, a hang past the timeout), the caller gets one line that names the engine: an
:class:`EngineFailed`, exit code 2, never an alignprobe internal error.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from typing import Any, Mapping

from alignprobe.engine_errors import EngineFailed
from alignprobe.errors import BadInput
from alignprobe.probes.engine_side import ENGINE_SIDE_DIR

DEFAULT_TIMEOUT_S = 1800.0  # engine start (torch.compile on a cold cache can take minutes) plus the prompts
LOG_TAIL_BYTES = 64 * 1024


def engine_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment for an engine process: the driver folder on PYTHONPATH (a connector loads by module path)."""
    env = dict(os.environ)
    env.update(extra or {})
    env["PYTHONPATH"] = os.pathsep.join(p for p in (ENGINE_SIDE_DIR, env.get("PYTHONPATH", "")) if p)
    return env


def run_driver(
    engine: str,
    python: str | None,
    driver: str,
    request: Mapping[str, Any],
    workdir: str | os.PathLike,
    *,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    env: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """Run ``driver`` under ``python`` (default: this interpreter) on ``request``; returns its result."""
    python = _executable(engine, python)
    folder = os.fspath(workdir)
    os.makedirs(folder, exist_ok=True)
    request_path = os.path.join(folder, "request.json")
    result_path = os.path.join(folder, "result.json")
    log_path = os.path.join(folder, "engine.log")
    if os.path.exists(result_path):
        os.remove(result_path)
    with open(request_path, "w", encoding="utf-8") as fh:
        json.dump(dict(request), fh)
    with open(log_path, "wb") as log:
        process = subprocess.Popen(
            [python, driver, request_path, result_path],
            stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
            env=engine_env(env), start_new_session=True,  # its own group: a timeout or ^C stops the engine's children too
        )
        try:
            code = process.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            stop_process(process)
            raise EngineFailed(f"{engine} did not finish within {timeout_s:g} s (engine log: {log_path})") from None
        except BaseException:
            stop_process(process)
            raise
    result = _read_result(result_path)
    if result is not None and "error" not in result and code == 0:
        return result
    why = result["error"] if result and result.get("error") else _last_line(log_path) or f"exit status {code}"
    raise EngineFailed(f"{engine} failed: {why} (engine log: {log_path})")


def check_engine_python(engine: str, python: str | None, module: str, timeout_s: float = 60.0) -> str:
    """That ``python`` runs and finds ``module`` (e.g. vllm); returns the interpreter's path.

    Found, not imported: importing vLLM 0.32 takes about 30 s on a busy 2-core machine, the better part
    of what a wrong venv would cost; a wrong or incomplete venv is caught here in under a second, and
    an install that is there but broken by the driver's own import, as before."""
    python = _executable(engine, python)
    probe = f"import importlib.util, sys; sys.exit(0 if importlib.util.find_spec({module!r}) else 9)"
    try:
        done = subprocess.run([python, "-c", probe], stdin=subprocess.DEVNULL, capture_output=True,
                              env=engine_env(), timeout=timeout_s)
    except subprocess.TimeoutExpired:
        raise EngineFailed(f"{engine}: {python} did not start within {timeout_s:g} s") from None
    except OSError as exc:
        raise BadInput(f"{engine}: the engine's Python {python!r} does not run ({exc.strerror or exc})") from None
    if done.returncode == 9:
        raise BadInput(f"{engine}: {python} has no {module} module: give the Python of {engine}'s venv "
                       "(engine_python / --engine-python)")
    if done.returncode != 0:
        lines = done.stderr.decode("utf-8", "replace").strip().splitlines()
        raise BadInput(f"{engine}: the engine's Python {python!r} failed to start "
                       f"({lines[-1][:300] if lines else f'exit status {done.returncode}'})")
    return python


def _executable(engine: str, python: str | None) -> str:
    python = python or sys.executable
    if not os.path.isfile(python) or not os.access(python, os.X_OK):
        raise BadInput(f"{engine}: the engine's Python {python!r} is not an executable file (give --engine-python)")
    return python


def stop_process(process: subprocess.Popen) -> None:
    """SIGTERM, then SIGKILL, to the process group of a process started with start_new_session=True."""
    for sig, wait in ((signal.SIGTERM, 10.0), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(process.pid, sig)
        except ProcessLookupError:
            return
        try:
            process.wait(timeout=wait)
            return
        except subprocess.TimeoutExpired:
            continue


def _read_result(path: str) -> dict[str, Any] | None:
    try:
        with open(path, encoding="utf-8") as fh:
            value = json.load(fh)
    except (OSError, ValueError):
        return None
    return value if isinstance(value, dict) else None


def _last_line(log_path: str) -> str:
    """The last line of the engine's log that looks like an error (else its last line)."""
    try:
        with open(log_path, "rb") as fh:
            fh.seek(max(0, os.path.getsize(log_path) - LOG_TAIL_BYTES))
            lines = [ln.strip() for ln in fh.read().decode("utf-8", "replace").splitlines() if ln.strip()]
    except OSError:
        return ""
    for line in reversed(lines):
        if "Error" in line or "error:" in line.lower():
            return line[:300]
    return lines[-1][:300] if lines else ""
