"""Every `orch …` command orch can print (hints, notes, reasons, `next[]`) is an exact command its own CLI parser accepts.

The templates are read from the source: every backticked `orch …` span in a string literal or f-string of the
`orchestrator` package, and every literal that is itself a command (`orch …`, printed as data in `next` steps) (docstrings and comments are prose, not output). Each interpolation is filled with a plain
word, the documented placeholders (TEXT, PLAN, …) with sample values, and the command is parsed by click down to
its subcommand, required arguments included. A subcommand that works on a run names it (`--run`, or `orch resume
RUN_ID`): a hint is copied into a new shell, where "the newest run of this pane" may be another run.

A command that takes the caller's words is printed by one helper (`orchestrator.hints.orch_command`), never spelled
out: every call of it is rendered as it prints, TEXT replaced by hostile words (a leading `-`, quotes, newlines,
`--json` itself) quoted as a shell would, and the parsed command must hold exactly those words where TEXT stood.
"""

from __future__ import annotations

import ast
import re
import shlex
from functools import cache
from pathlib import Path

import click
import pytest

from orchestrator.cli import COMMANDS, cli, with_caller_flags
from orchestrator.hints import TEXT, orch_command

PACKAGE = Path(__file__).resolve().parents[2] / "orchestrator"
SPAN = re.compile(r"`(orch(?: [^`]*)?)`")
FILLED = "x1"
PLACEHOLDERS = {"TEXT": "why", "PLAN": "plan.toml", "RUN_ID": "r1", "TASK": "t1", "…": "why", "PATH": "/bin/herdr", "TEXT…": "why"}
# Shell syntax a hint may show around the command (a redirection or a pipe is not an argument).
SHELL_TAIL = re.compile(r"\s(?:<|>|\|).*$")


def _docstrings(tree: ast.AST) -> set[int]:
    ids: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
                ids.add(id(first.value))
    return ids


def _text(node: ast.AST) -> str | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        parts = []
        for value in node.values:
            parts.append(value.value if isinstance(value, ast.Constant) else FILLED)  # type: ignore[union-attr]
        return "".join(str(p) for p in parts)
    return None


@cache
def templates() -> list[tuple[str, str]]:
    """(where, command) for every backticked `orch …` span in the package's string literals."""
    found: list[tuple[str, str]] = []
    for path in sorted(PACKAGE.rglob("*.py")):
        tree = ast.parse(path.read_text())
        skip = _docstrings(tree)
        inner = {id(v) for n in ast.walk(tree) if isinstance(n, ast.JoinedStr) for v in n.values}
        for node in ast.walk(tree):
            if id(node) in skip or id(node) in inner:
                continue
            text = _text(node)
            if text is None:
                continue
            # A command held as data (a `next` step, a decision's commands) is printed as it stands.
            words = text.split()
            # (Held as data, a command names its run: prose such as "orch run works only inside herdr" does not.)
            data = len(words) > 1 and words[0] == "orch" and words[1] in COMMANDS and "--run" in words and "`" not in text
            spans = [text] if data else SPAN.findall(text)
            for span in spans:
                found.append((f"{path.relative_to(PACKAGE.parent)}:{node.lineno}", span))  # type: ignore[attr-defined]
    return found


def parse(argv: list[str]) -> click.Command:
    """Parse argv with orch's own click tree (required arguments and options too); the command it reaches."""
    ctx = cli.make_context("orch", list(argv), resilient_parsing=False)
    command: click.Command = cli
    while isinstance(command, click.Group):
        rest = [*getattr(ctx, "_protected_args", []), *ctx.args]  # click 8.2+ keeps the subcommand words apart
        if not rest:
            break
        name, sub, rest = command.resolve_command(ctx, rest)
        assert sub is not None and name is not None
        ctx = sub.make_context(name, rest, parent=ctx)
        command = sub
    return command


def argv_of(span: str) -> list[str]:
    words = shlex.split(SHELL_TAIL.sub("", span))
    assert words[0] == "orch"
    # `ID=sent`: an effect id placeholder inside an option's value.
    return [PLACEHOLDERS.get(w, re.sub(r"^ID=", "7=", w)) for w in words[1:]]


def test_the_package_prints_hint_templates() -> None:
    spans = [span for _, span in templates()]
    assert len(spans) > 20
    assert any("orch approve --run" in s for s in spans)


# Prose naming a command that is run by something else, never copied by the person: doctor's probe callback is an
# `orch inbox add` the agent's shell runs (its packet holds the exact line, with the run).
MENTIONS = {("orchestrator/doctor.py", "orch inbox add")}


def _is_mention(argv: list[str]) -> bool:
    """Prose naming a command ("`orch answer` replies to…", "`orch run` drives…"): command words only, and not runnable
    as they stand (a required argument is missing), so nobody can mistake them for a command to copy."""
    try:
        parse(argv)
    except click.MissingParameter:
        return all(not w.startswith("-") and w.isalpha() for w in argv)
    except click.ClickException:
        return False
    return False


@pytest.mark.parametrize(("where", "span"), templates(), ids=lambda v: v if ":" in v else None)
def test_every_hint_template_parses_and_names_its_run(where: str, span: str) -> None:
    argv = argv_of(span)
    if not argv or _is_mention(argv) or (where.split(":")[0], span) in MENTIONS:
        return
    try:
        command = parse(argv)
    except click.ClickException as exc:
        pytest.fail(f"{where}: `{span}` does not parse: {exc.format_message()}")
    names = {p.name for p in command.params}
    # `orch status --all` lists every run; `orch resume RUN_ID` and `orch cancel RUN` name it positionally.
    if "run_id" in names and command.name not in ("resume", "cancel") and "--all" not in argv:
        assert "--run" in argv, f"{where}: `{span}` works on a run but does not name it with --run"


# --- commands that take the caller's words --------------------------------------------------------------------------

# What a person or an agent controller may put where TEXT stands, each quoted for the shell as they would.
HOSTILE = (
    "-1 is not a valid page size",
    "--json",
    "--",
    "-",
    "--reason=x",
    'say "yes", then \'no\'',
    "first line\nsecond line\n",
    "",
)


def _value(node: ast.expr) -> str:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.Name) and node.id == "TEXT":
        return TEXT
    return FILLED


@cache
def printed_forms() -> list[tuple[str, str]]:
    """(where, command) for every call of `orch_command` in the package, rendered as it prints (with and without
    --json where the call passes the caller's flag through)."""
    found: list[tuple[str, str]] = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "orch_command"):
                continue
            words = [_value(a) for a in node.args]
            kw = {k.arg: k.value for k in node.keywords}
            text = kw.get("text")
            assert text is None or isinstance(text, ast.Constant), f"{path}:{node.lineno}: text= is a constant"
            flag = kw.get("as_json")
            flags = [flag.value] if isinstance(flag, ast.Constant) else ([False, True] if flag is not None else [False])
            for as_json in flags:
                command = orch_command(*words, text=isinstance(text, ast.Constant) and bool(text.value), as_json=bool(as_json))
                found.append((f"{path.relative_to(PACKAGE.parent)}:{node.lineno}", command))
    return found


def test_the_package_prints_commands_with_text_through_the_helper() -> None:
    forms = [c for _, c in printed_forms()]
    assert len(forms) > 25
    assert any(c.endswith("-- TEXT") for c in forms) and any("--reason TEXT" in c for c in forms)


def test_no_printed_command_spells_out_its_text_by_hand() -> None:
    # A template written as a string (`orch answer … TEXT`) would put TEXT where a leading `-` makes it an option.
    spelled = [f"{where}: {span}" for where, span in templates() if TEXT in span.split()]
    assert spelled == []


def _params(command: str, text: str) -> tuple[click.Command, dict[str, object]]:
    """The command as the person runs it, TEXT replaced by their words as their shell quotes them, parsed by click."""
    argv = shlex.split(command.replace(TEXT, shlex.quote(text)))
    assert argv[0] == "orch"
    ctx = cli.make_context("orch", argv[1:], resilient_parsing=False)
    name, sub, rest = cli.resolve_command(ctx, [*getattr(ctx, "_protected_args", []), *ctx.args])
    assert sub is not None and name is not None
    while isinstance(sub, click.Group):
        sub_ctx = sub.make_context(name, rest, parent=ctx)
        name, sub, rest = sub.resolve_command(sub_ctx, [*getattr(sub_ctx, "_protected_args", []), *sub_ctx.args])
        assert sub is not None and name is not None
        ctx = sub_ctx
    return sub, sub.make_context(name, rest, parent=ctx).params


@pytest.mark.parametrize(("where", "command"), printed_forms(), ids=lambda v: v if ":" in v else None)
def test_every_printed_command_takes_any_words_for_text_as_printed(where: str, command: str) -> None:
    for text in HOSTILE if TEXT in command.split() else ("",):
        for printed in (command, (with_caller_flags(f"`{command}`") or "").strip("`")):  # a hint under --json gains the flag
            try:
                sub, params = _params(printed, text)
            except click.ClickException as exc:
                pytest.fail(f"{where}: `{printed}` with TEXT={text!r} does not parse: {exc.format_message()}")
            if TEXT in command.split():
                held = [k for k, v in params.items() if v == text]
                assert held in (["text"], ["reason"]), f"{where}: `{printed}` with TEXT={text!r} parsed as {params}"
            assert params.get("as_json") is ("--json" in shlex.split(printed)), f"{where}: `{printed}` lost its --json"
            if "run_id" in {p.name for p in sub.params} and sub.name not in ("resume", "cancel"):
                assert params.get("run_id") == FILLED or "RUN_ID" in command, f"{where}: `{printed}` does not name its run"


def test_the_helper_prints_the_one_form() -> None:
    assert orch_command("answer", "--run", "w1:p1-20261202T060000Z", "api", text=True, as_json=True) == "orch answer --run w1:p1-20261202T060000Z api --json -- TEXT"
    assert orch_command("finish", "--run", "r1", "--abandon", "api", "--reason", TEXT) == "orch finish --run r1 --abandon api --reason TEXT"
    assert orch_command("wait", "--run", "odd id") == "orch wait --run 'odd id'"
    assert with_caller_flags("stop it: `orch send --run r1 api --kind stop -- TEXT`") == "stop it: `orch send --run r1 api --kind stop --json -- TEXT`"
