"""Signals and pipes, in real processes: SIGINT while importing, during a capture, a second one
during cleanup, one just before exit; ``compare ... | head`` (a closed stdout keeps the exit code)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from bad_input_helpers import fingerprints
from dump_helpers import H, claims, random_samples, write

pytestmark = pytest.mark.slow  # each case starts a Python process (0.5-3 s)

# The console script, as pip generates it.
ALIGNPROBE = [sys.executable, "-c", "import sys; from alignprobe.cli.entry import main; sys.exit(main())"]


def one_interrupted_line(stderr: bytes) -> None:
    text = stderr.decode()
    assert text.strip().splitlines() == ["alignprobe: interrupted"], text
    assert "Traceback" not in text and "KeyboardInterrupt" not in text


@pytest.fixture(scope="module")
def dumps(tmp_path_factory):
    folder = tmp_path_factory.mktemp("d")
    a = write(folder / "a.h5", random_samples([5, 7], {"aux": 3 * H, "final": H}), claims())
    b = write(folder / "b.h5", random_samples([5, 7], {"aux": 3 * H, "final": H}, seed=1), claims())
    return a, b


def loaded(pid: int, library: str) -> bool:
    try:
        with open(f"/proc/{pid}/maps") as fh:
            return library in fh.read()
    except OSError:
        return False


def test_sigint_while_importing(tmp_path):
    """SIGINT while the command's module loads torch (seconds): the command has not started yet.
    (The package root's own imports, h5py and numpy, run before the console script's handler.)"""
    prompts = tmp_path / "p.jsonl"
    prompts.write_text(json.dumps({"input_ids": [1, 2, 3]}) + "\n")
    before = fingerprints([prompts])
    proc = subprocess.Popen([*ALIGNPROBE, "capture", "hf", "--model", tmp_path, "--prompts", prompts, "--out",
                             tmp_path / "o.h5"], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 60
    while not loaded(proc.pid, "libtorch") and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.001)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    if proc.returncode == 2:  # torch finished loading before the signal landed: nothing to check
        pytest.skip("the import finished before the signal")
    assert proc.returncode == 130, err
    one_interrupted_line(err)
    assert fingerprints([prompts]) == before


def test_sigint_while_the_package_root_loads(tmp_path):
    """SIGINT while `import alignprobe` itself loads numpy and h5py, before the console script's own code."""
    script = os.path.join(os.path.dirname(sys.executable), "alignprobe")  # the installed console script
    if not os.path.exists(script):
        pytest.skip("no alignprobe console script beside this Python")
    missing = tmp_path / "missing.h5"
    proc = subprocess.Popen([script, "inspect", missing], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 60
    while not loaded(proc.pid, "_multiarray_umath") and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.0005)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    if proc.returncode == 2:  # the refusal came before the signal landed: nothing to check
        pytest.skip("the command finished before the signal")
    assert proc.returncode == 130, err
    one_interrupted_line(err)
    assert not missing.exists()


def run_script(body: str):
    """A process that drives alignprobe.cli.interrupt as the console script does, then runs ``body``."""
    script = textwrap.dedent("""
        import os, signal, sys
        from alignprobe.cli import interrupt
        interrupt.install()
        interrupt.running()
        def sigint():
            os.kill(os.getpid(), signal.SIGINT)
    """) + textwrap.dedent(body)
    return subprocess.run([sys.executable, "-c", script], capture_output=True, timeout=60)


def test_second_sigint_during_cleanup_still_says_interrupted():
    run = run_script("""
        try:
            sigint()
            import time; time.sleep(5)
        except KeyboardInterrupt:
            sigint()  # during cleanup: the process ends now, with the line
            print("cleanup went on", file=sys.stderr)
    """)
    assert run.returncode == 130
    one_interrupted_line(run.stderr)


def test_sigint_after_the_command_finished_says_interrupted():
    run = run_script("""
        interrupt.done()
        sigint()
        print("not reached", file=sys.stderr)
    """)
    assert run.returncode == 130
    one_interrupted_line(run.stderr)


def console_script_with(prelude: str, *args):
    """The console script, as pip generates it, in a process that first runs ``prelude``."""
    code = textwrap.dedent(prelude) + "\nfrom alignprobe.cli.entry import main\nsys.exit(main())\n"
    return subprocess.Popen([sys.executable, "-c", code, *map(str, args)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)


def lines_until(stream, marker: bytes, limit: int = 20) -> list[bytes]:
    seen = []
    for _ in range(limit):
        line = stream.readline()
        if not line:
            break
        seen.append(line.strip())
        if line.strip() == marker:
            break
    return seen


def test_sigint_while_a_finished_command_exits_says_interrupted(tmp_path):
    """The command has printed its outcome; the process is running its exit handlers (a flush, a
    pool's shutdown). A Ctrl-C then is the same line and 130: the user asked the run to stop, and a
    script's next step must not start (`alignprobe gate && train`)."""
    proc = console_script_with("""
        import atexit, sys, time
        atexit.register(lambda: (print("exiting", file=sys.stderr, flush=True), time.sleep(20)))
    """, "inspect", tmp_path / "missing.h5")
    seen = lines_until(proc.stderr, b"exiting")
    assert seen[-1] == b"exiting", seen
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, (seen, err)
    assert b"no such" in seen[0].lower() or b"missing.h5" in seen[0], seen  # the command's own line came first
    one_interrupted_line(err)


def test_a_finished_command_never_reaches_pythons_teardown(tmp_path):
    """Python's shutdown puts SIGINT back to its default action, then tears modules down (torch and
    h5py take a while): a Ctrl-C there killed the process by the signal with no line. The console
    script ends before that teardown; a Ctrl-C that still reached it must say so and exit 130."""
    proc = console_script_with("""
        import sys, time
        class TornDownLate:
            def __del__(self):
                print("tearing down", file=sys.stderr, flush=True)
                time.sleep(5)
        late = TornDownLate()
    """, "inspect", tmp_path / "missing.h5")
    seen = lines_until(proc.stderr, b"tearing down")
    if seen and seen[-1] == b"tearing down":
        proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert b"tearing down" not in seen, (proc.returncode, seen, err)
    assert proc.returncode == 2, (seen, err)


def test_sigint_during_a_capture_keeps_inputs_and_says_one_line(tmp_path):
    """A real capture held by a server that never answers: one SIGINT, one line, 130, inputs unchanged."""
    server = subprocess.Popen([sys.executable, "-c", textwrap.dedent("""
        import http.server, sys, time
        class H(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                print("request", flush=True)
                time.sleep(60)
            do_POST = do_GET
            def log_message(self, *a): pass
        s = http.server.HTTPServer(("127.0.0.1", 0), H)
        print(s.server_address[1], flush=True)
        s.serve_forever()
    """)], stdout=subprocess.PIPE, text=True)
    try:
        port = int(server.stdout.readline())
        prompts = tmp_path / "p.jsonl"
        prompts.write_text(json.dumps({"input_ids": [1, 2, 3]}) + "\n")
        before = fingerprints([prompts])
        proc = subprocess.Popen([*ALIGNPROBE, "capture", "sglang", "--url", f"http://127.0.0.1:{port}", "--prompts",
                                 prompts, "--out", tmp_path / "o.h5", "--num-layers", "4", "--hidden-size", "8",
                                 "--layer-ids", "1", "--quiet"], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        assert server.stdout.readline().strip() == "request"  # the capture is waiting on the server
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == 130, err
        one_interrupted_line(err)
        assert fingerprints([prompts]) == before
    finally:
        server.kill()
        server.wait()


def test_closed_stdout_keeps_the_exit_code(dumps, tmp_path):
    """``alignprobe compare ... | head``: the reader is gone before the summary is written."""
    import shutil

    twin = tmp_path / "twin.h5"  # the same states in another file: a PASS
    shutil.copy(dumps[0], twin)
    args = [*ALIGNPROBE, "compare", "--train-dump", dumps[0], "--serve-dump", twin, "--tokenizer", "none",
            "--set", "severity.same_dump=info"]
    expected = subprocess.run(args, capture_output=True, timeout=120)
    assert expected.returncode == 0, expected.stderr  # a PASS: a broken pipe must not turn it into 1
    read_end, write_end = os.pipe()
    os.close(read_end)  # every write to stdout now fails with EPIPE
    try:
        piped = subprocess.run(args, stdout=write_end, stderr=subprocess.PIPE, timeout=120)
    finally:
        os.close(write_end)
    assert piped.returncode == expected.returncode, piped.stderr
    assert piped.stderr.decode() == expected.stderr.decode(), piped.stderr
