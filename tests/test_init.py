"""Importing ``alignprobe`` has no side effects: no signal handler, nothing heavy loaded, no hook
installed in another module; the console script (cli/entry.py) installs its handlers itself."""

import subprocess
import sys
import textwrap


def run(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=120)


def test_import_changes_no_signal_handler_and_loads_nothing_heavy():
    done = run("""
        import signal, sys
        before = signal.getsignal(signal.SIGINT)
        import alignprobe
        assert signal.getsignal(signal.SIGINT) is before, signal.getsignal(signal.SIGINT)
        heavy = [m for m in ("numpy", "h5py", "torch", "matplotlib", "click") if m in sys.modules]
        assert heavy == [], heavy
        print(alignprobe.compare.__name__, alignprobe.CompareResult.__name__, "audit" in dir(alignprobe))
    """)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["alignprobe.compare", "CompareResult", "True"]


def test_the_console_script_is_named_alignprobe_and_still_imports_cleanly():
    """The root installed the SIGINT handler when sys.argv[0] was 'alignprobe', in any process."""
    done = run("""
        import signal, sys
        sys.argv[0] = "alignprobe"
        import alignprobe
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    """)
    assert done.returncode == 0, done.stderr


def test_a_result_draws_itself_without_the_package_root_wiring_it():
    done = run("""
        import alignprobe.compare.result as result
        assert not hasattr(result, "VIEWS")  # no hook for the root to install
        from alignprobe.report import figures
        assert result._view("similarity") is figures.similarity
        from alignprobe.report.notebook import repr_html
        assert result._view("repr_html") is repr_html
    """)
    assert done.returncode == 0, done.stderr
