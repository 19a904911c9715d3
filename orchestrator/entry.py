"""The `orch` console script: a worker's callback goes straight to the intake, every other command line to click."""

from __future__ import annotations

import codecs
import os
import sys
from collections.abc import Sequence


def callback_argv(args: Sequence[str]) -> tuple[str, str] | None:
    """(run id, text) when the command line is exactly a worker's callback as packets write it, else None.

    `orch inbox add --run RUN_ID TEXT` and nothing else: no other option, no `-` (stdin, which only one reader may
    consume), no word click could read as an option. click parses this form to the same two values, and its command
    (`orchestrator.commands.inbox`) takes the same intake fast path with them; anything else is click's to parse.
    """
    if len(args) != 5 or list(args[:3]) != ["inbox", "add", "--run"]:
        return None
    run_id, text = args[3], args[4]
    if not run_id or run_id.startswith("-") or not text or text.startswith("-"):
        return None
    return run_id, text


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
    calls first; whatever it hands back (no ledger, no such run, a view it cannot judge) is given to click whole, so the
    full path answers exactly as before. A failure is reported by the CLI's own error handler.
    """
    found = callback_argv(sys.argv[1:])
    if found is not None and _utf8_stdout():
        try:
            from orchestrator.intake import render_added, take
            from packets.inert import inert

            outcome = take(os.environ, found[0], found[1], sys.stdin.buffer, source="cli")
            if outcome.added is not None:
                sys.stdout.write(inert(render_added(outcome.added)))
                sys.stdout.flush()
                return
        except BaseException:
            from orchestrator.cli import error_handler

            with error_handler():
                raise
    from orchestrator.cli import main as click_main

    click_main()
