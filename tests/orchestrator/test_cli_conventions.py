"""CLI conventions checked on every command of the click tree: version, help with examples, --json, no colour, exit codes, completion."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import click
import pexpect
import pytest
from click.testing import CliRunner

from orchestrator import __version__
from orchestrator.cli import cli
from orchestrator.errors import ExitCode

ROOT = Path(__file__).resolve().parents[2]

# Commands that print something other than a report, so a --json flag would mean nothing.
NO_JSON = {
    "plan schema": "prints a JSON Schema already",
    "completion": "prints a shell script",
}


def walk(command: click.Command, path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], click.Command]]:
    """Every command and group under ``command``, with its path below `orch`."""
    yield path, command
    if isinstance(command, click.Group):
        # The root loads its commands lazily: ask it, as click does, rather than reading `.commands`.
        ctx = click.Context(command)
        for name in command.list_commands(ctx):
            sub = command.get_command(ctx, name)
            assert sub is not None, name
            yield from walk(sub, (*path, name))


TREE = list(walk(cli))
LEAVES = [(path, cmd) for path, cmd in TREE if not isinstance(cmd, click.Group)]


def name(path: tuple[str, ...]) -> str:
    return " ".join(path) or "(root)"


def test_version_from_the_installed_entry_point() -> None:
    orch = shutil.which("orch")
    assert orch is not None, "orch is not installed (pip install -e '.[test]')"
    for flag in ("--version", "-V"):
        done = subprocess.run([orch, flag], capture_output=True, text=True, timeout=30)
        assert (done.returncode, done.stdout, done.stderr) == (0, f"orch {__version__}\n", "")


@pytest.mark.parametrize("path", [path for path, _ in TREE], ids=name)
def test_help_works_and_shows_an_example(path: tuple[str, ...]) -> None:
    runner = CliRunner()
    long = runner.invoke(cli, [*path, "--help"], prog_name="orch")
    short = runner.invoke(cli, [*path, "-h"], prog_name="orch")
    assert long.exit_code == 0, long.output
    assert short.output == long.output
    assert long.output.startswith(f"Usage: {' '.join(('orch', *path))} ")
    lines = long.output.splitlines()
    assert "  Example:" in lines, f"orch {name(path)} --help has no Example: block"
    examples = lines[lines.index("  Example:") + 1 :]
    shown = [line.strip() for line in examples[: examples.index("")] if line.strip()]
    # Each example block shows the command itself at least once, as a person would type it.
    assert any(re.search(rf"(^|\| |\$\()orch {re.escape(' '.join(path))}", line) for line in shown), shown


@pytest.mark.parametrize("path", [path for path, _ in LEAVES], ids=name)
def test_every_reporting_command_has_json(path: tuple[str, ...]) -> None:
    command = dict(TREE)[path]
    flags = {opt for param in command.params for opt in getattr(param, "opts", [])}
    if " ".join(path) in NO_JSON:
        assert "--json" not in flags
    else:
        assert "--json" in flags, f"orch {name(path)} reports but has no --json"


def test_no_colour_codes_or_styling_anywhere_in_orch() -> None:
    # orch never colours output (NO_COLOR holds trivially); the only escapes are `orch run`'s cursor moves on a tty.
    sgr = re.compile(r"(\\x1b|\\033|\\u001b|\\e)\[[0-9;]*m")
    styled = re.compile(r"\b(secho|style|unstyle)\(|colorama|rich\b|termcolor")
    offenders = []
    for package in ("orchestrator", "packets", "registry"):
        for source in sorted((ROOT / package).rglob("*.py")):
            text = source.read_text()
            if sgr.search(text) or styled.search(text):
                offenders.append(str(source.relative_to(ROOT)))
    assert offenders == []


def _preflight_on_a_tty(tmp_path: Path, no_color: bool) -> str:
    """`orch preflight` outside herdr on a real pseudo-terminal: it stops at the first gate and shows the checklist."""
    env = {k: v for k, v in os.environ.items() if k not in ("HERDR_ENV", "NO_COLOR")}
    if no_color:
        env["NO_COLOR"] = "1"
    child = pexpect.spawn(sys.executable, ["-m", "orchestrator", "preflight", "plan.toml"], cwd=str(tmp_path), env=env, encoding="utf-8", timeout=30)
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == int(ExitCode.FAILURE)
    return str(child.before).replace("\r\n", "\n")


def test_preflight_checklist_marks_follow_no_color_on_a_terminal(tmp_path: Path) -> None:
    hint = "hint: run orch from a shell or agent inside a herdr pane\n"
    reason = "this agent is outside herdr (HERDR_ENV is not 1); stop: orch orchestrates only from a herdr pane"
    assert _preflight_on_a_tty(tmp_path, no_color=False) == f"✗ herdr env       HERDR_ENV is unset\norch: {reason}\n{hint}"
    assert _preflight_on_a_tty(tmp_path, no_color=True) == f"FAIL herdr env       HERDR_ENV is unset\norch: {reason}\n{hint}"


def _exit_code_table(text: str) -> dict[int, str]:
    return {int(code): member for code, member in re.findall(r"^\| (\d+) \| `([A-Z_]+)` \|", text, flags=re.M)}


def test_troubleshooting_exit_code_table_matches_exit_code() -> None:
    documented = _exit_code_table((ROOT / "docs" / "troubleshooting.md").read_text())
    assert documented == {int(member): member.name for member in ExitCode}


def test_readme_exit_code_table_lists_exactly_the_exit_codes() -> None:
    # The README's table has no name column: it must list every code once, and no other.
    text = (ROOT / "README.md").read_text()
    table = text[text.index("| Exit code |") :].split("\n\n", 1)[0]
    codes = [int(code) for code in re.findall(r"^\| (\d+) \|", table, flags=re.M)]
    assert sorted(codes) == sorted(int(member) for member in ExitCode)


def test_completion_scripts_are_clicks() -> None:
    runner = CliRunner()
    for shell, marker in (
        ("bash", "complete -o nosort -F _orch_completion orch"),
        ("zsh", "compdef _orch_completion orch"),
        ("fish", 'complete --no-files --command orch --arguments "(_orch_completion)"'),
    ):
        result = runner.invoke(cli, ["completion", shell], prog_name="orch")
        assert result.exit_code == 0, result.output
        assert f"_ORCH_COMPLETE={shell}_complete" in result.output
        assert marker in result.output
    refused = runner.invoke(cli, ["completion", "tcsh"], prog_name="orch")
    assert refused.exit_code == int(ExitCode.USAGE)


def test_bash_completion_completes_commands_and_options_for_real() -> None:
    bash = shutil.which("bash")
    if bash is None:
        pytest.skip("bash is not installed")
    script = (
        'source <(orch completion bash)\n'
        'complete_words() { COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); COMPREPLY=(); _orch_completion orch; printf "%s\\n" "${COMPREPLY[@]}"; echo --; }\n'
        "complete_words orch pr\n"
        "complete_words orch plan ''\n"
        "complete_words orch completion ''\n"
        "complete_words orch status --a\n"
    )
    done = subprocess.run([bash, "-c", script], capture_output=True, text=True, timeout=60)
    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout == "preflight\nprovision\n--\ncheck\nschema\n--\nbash\nzsh\nfish\n--\n--all\n--\n"
