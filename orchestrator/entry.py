"""The `orch` console script: a worker's callback goes straight to the intake, every other command line to click."""

from __future__ import annotations

import codecs
import os
import sys
from collections.abc import Sequence


# The options of `orch inbox add`: exactly one of these words where TEXT would be is that option (a person's
# `orch inbox add --run RUN --json` asks for JSON, and says no TEXT was given); after `--` it is TEXT.
_OPTIONS = frozenset({"--json", "--check-in", "--help", "--source", "--run", "--spool"})


def callback_argv(args: Sequence[str]) -> tuple[str, str] | None:
    """(run id, text) when the command line is exactly a worker's callback as packets write it, else None.

    `orch inbox add --run RUN_ID TEXT` (or `... --run RUN_ID -- TEXT`) and nothing else: no other option, no `-`
    (stdin, which only one reader may consume). TEXT is whatever the fifth word is, even one that starts with `-`, but
    for exactly one of the command's own option words: a worker's text is recorded (and kept aside when it is no
    envelope), never a usage error (docs/message-contract.md). click parses this form to the same two values (`with_text_last` makes sure of it), and
    its command (`orchestrator.commands.inbox`) takes the same intake fast path with them.
    """
    ended = len(args) == 6 and args[4] == "--"  # options end here: what follows is TEXT whatever it looks like
    if ended:
        args = [*args[:4], args[5]]
    if len(args) != 5 or list(args[:3]) != ["inbox", "add", "--run"]:
        return None
    run_id, text = args[3], args[4]
    if not run_id or run_id.startswith("-") or not text or text == "-" or (text in _OPTIONS and not ended):
        return None
    return run_id, text


def spool_argv(args: Sequence[str]) -> tuple[str, str] | None:
    """(run id, text) when the command line is exactly a remote worker's callback: `orch inbox add --spool --run RUN_ID
    TEXT` (or `... -- TEXT`), the same words as ``callback_argv`` with `--spool` after `add` (orchestrator.spool)."""
    if len(args) < 3 or list(args[:3]) != ["inbox", "add", "--spool"]:
        return None
    return callback_argv([*args[:2], *args[3:]])


def with_text_last(args: Sequence[str]) -> list[str]:
    """The command line for click: a callback's TEXT that starts with `-` gets a `--` before it, so click reads it as
    TEXT, never as an option (`--json`, `--run=x`) or a usage error."""
    spooled = spool_argv(args)
    found = spooled or callback_argv(args)
    if found is None or not found[1].startswith("-") or "--" in args:
        return list(args)
    return ["inbox", "add", *(["--spool"] if spooled else []), "--run", found[0], "--", found[1]]


def _utf8_stdout() -> bool:
    # click.echo re-wraps a stream whose encoding cannot write every character; only a UTF-8 stdout is written as is.
    encoding = getattr(sys.stdout, "encoding", None)
    try:
        return encoding is not None and codecs.lookup(encoding).name == "utf-8"
    except LookupError:
        return False


def main() -> None:
    """Console-script entry point: what `orchestrator.cli.main` does, without importing click for a worker's callback.

    Every worker callback of an `orch run` run is one `orch inbox add` process, and click's import alone was a third
    of one (docs/PERFORMANCE.md). The callback is recorded by `orchestrator.intake.take`, the function the click command
    calls first; when it cannot record (no ledger, no such run, an empty message) the command line goes to click whole,
    whose command opens the engine to say what is wrong. A failure is reported by the CLI's own error handler.
    """
    spooled = spool_argv(sys.argv[1:])
    if spooled is not None and _utf8_stdout():
        try:
            from orchestrator.spool import render_spooled, spool_message

            sys.stdout.write(render_spooled(spool_message(os.environ, spooled[0], spooled[1], sys.stdin.buffer), spooled[0]))
            sys.stdout.flush()
            return
        except BaseException:
            from orchestrator.cli import error_handler

            with error_handler():
                raise
    found = callback_argv(sys.argv[1:])
    if found is not None and _utf8_stdout():
        try:
            from orchestrator.intake import Added, render_added, take
            from packets.inert import inert

            outcome = take(os.environ, found[0], found[1], sys.stdin.buffer, source="cli")
            if isinstance(outcome, Added):
                sys.stdout.write(inert(render_added(outcome)))
                sys.stdout.flush()
                return
        except BaseException:
            from orchestrator.cli import error_handler

            with error_handler():
                raise
    from orchestrator.cli import main as click_main

    sys.argv[1:] = with_text_last(sys.argv[1:])
    click_main()
