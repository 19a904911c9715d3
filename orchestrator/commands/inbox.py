"""`orch inbox add|list`: hand a worker's callback to the ledger (validated, recorded once) and show every message's verdict."""

from __future__ import annotations

import sys

import click

from orchestrator.commands.base import emit, engine_from, json_option, run_option
from orchestrator.errors import OrchError
from orchestrator.inbox import add_message, inbound_text, list_messages, message_limit, read_inbound, render_added, render_list


@click.group()
def inbox() -> None:
    """Record worker callbacks and list them with their verdicts.

    \b
    Example:
      orch inbox list
      orch inbox add - < callback.txt
    """


@inbox.command("add")
@run_option
@click.option("--source", default="cli", show_default=True, help="How the message arrived (kept with it in the ledger).")
@json_option
@click.argument("text", required=False)
@click.pass_context
def inbox_add(ctx: click.Context, run_id: str | None, source: str, as_json: bool, text: str | None) -> None:
    """Validate one Message Contract envelope (TEXT, or stdin with `-`) and record it.

    Exits 0 whenever the message was recorded, even when it is kept aside (stale, unknown or mismatched):
    a worker's callback must not fail because of what it said. Exits 1 only when nothing could be recorded.

    \b
    Example:
      orch inbox add --run w1:p1-20260101T000000Z "[herdr-orchestration run=w1:p1-20260101T000000Z task=fix-login from=fix-login kind=update reply-to=w1:p2]
      Parser done, starting on tests"
      pbpaste | orch inbox add -
    """
    if text is None:
        raise OrchError("no message given", hint="pass the envelope as TEXT, or `-` to read it from stdin")
    engine = engine_from(ctx)
    run = engine.find_run(run_id)
    limit = message_limit(engine, run)
    # Both doors measure the same bytes against the same limit; stdin is never held beyond the limit.
    inbound = read_inbound(sys.stdin.buffer, limit) if text == "-" else inbound_text(text, limit)
    if inbound.complete and not inbound.text.strip():
        # Nothing to judge: recording it would only add an empty kept-aside message to the inbox.
        raise OrchError("the message is empty", hint="pass the envelope as TEXT, or pipe it in: `orch inbox add - < callback.txt`")
    added = add_message(engine, run, inbound, source=source, limit=limit)
    emit(added, as_json, render_added)


@inbox.command("list")
@run_option
@json_option
@click.pass_context
def inbox_list(ctx: click.Context, run_id: str | None, as_json: bool) -> None:
    """List every message of a run with its verdict (accepted, or kept aside with the reason).

    \b
    Example:
      orch inbox list --json
    """
    engine = engine_from(ctx)
    emit(list_messages(engine, engine.find_run(run_id)), as_json, render_list)
