"""The README's commands stay true: every alignprobe command and option it shows exists.

(The demo command itself runs end to end in test_demo.py; CI runs the test command.)
"""

import pathlib
import re
import shlex

import click
import pytest
from click.testing import CliRunner

from alignprobe.cli.main import cli

README = pathlib.Path(__file__).resolve().parents[2] / "README.md"


def readme_commands():
    text = README.read_text()
    commands = []
    for block in re.findall(r"```bash\n(.*?)```", text, flags=re.S):
        for line in block.splitlines():
            for part in line.split("&&"):
                part = part.split("#")[0].strip()
                if part.startswith("alignprobe "):
                    commands.append(part)
    return commands


def test_the_readme_shows_the_two_start_commands():
    commands = readme_commands()
    assert "alignprobe demo" in commands
    assert "pip install torch==2.13.0 -e '.[test]' && pytest" in README.read_text()
    ci = (README.parent / ".ci" / "run").read_text()
    assert "pip install torch==2.13.0 -e '.[test]' && pytest" in ci


@pytest.mark.parametrize("command", readme_commands())
def test_every_readme_command_and_option_exists(command):
    words = shlex.split(command)[1:]
    path = []
    group = cli
    # Walk down the command groups (capture -> hf) to the command the line runs.
    for word in words:
        if not isinstance(group, click.Group):
            break
        sub = group.get_command(click.Context(group), word)  # the top group loads commands lazily
        if sub is None:
            break
        path.append(word)
        group = sub
    assert path, f"README runs an unknown command: {command}"
    help_text = CliRunner().invoke(cli, [*path, "--help"]).output
    for option in (w.split("=")[0] for w in words if w.startswith("--")):
        assert option in help_text, f"{' '.join(path)} has no {option} (README: {command})"
