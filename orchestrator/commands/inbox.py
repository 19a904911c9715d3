"""`orch inbox add|list`: hand a worker's callback to the ledger (validated, recorded once) and show every message's verdict."""

from __future__ import annotations

import os
import sys

import click

from orchestrator.commands.base import echo_json, emit, engine_from, json_option, run_option
from orchestrator.errors import OrchError


@click.group()
def inbox() -> None:
    """Record worker callbacks and list them with their verdicts.

    \b
    Example:
      orch inbox list
      orch inbox add - < callback.txt
    """


# A TEXT that starts with "-" is a worker's text, never an unknown option: it is recorded (kept aside when it is no
# envelope), never a usage error that records nothing.
@inbox.command("add", context_settings={"ignore_unknown_options": True})
@run_option
@click.option("--source", default="cli", show_default=True, help="How the messages arrived (kept with them in the ledger).")
@click.option("--check-in", "check", is_flag=True, help="Then run one check-in and say what to do next.")
@json_option
@click.argument("text", required=False)
@click.pass_context
def inbox_add(
    ctx: click.Context, run_id: str | None, source: str, check: bool, as_json: bool, text: str | None
) -> None:
    """Validate a Message Contract envelope (TEXT, or stdin with `-`) and record it; `--check-in` then acts on it.

    Workers run this themselves (their packet's callback command), for both kinds of controller; a person may pipe a
    message in with `-`. One message per call: a second header line inside it is kept aside as `injection` (a
    worker's text cannot speak for another worker). Exits 0 whenever it was recorded, even when kept aside (stale,
    unknown or mismatched): a worker's callback must not fail because of what it said. Exits 1 only when nothing
    could be recorded. With `--check-in`, one check-in follows (as `orch observe --once`), and `next` says what to do.

    \b
    Example:
      orch inbox add --run w1:p1-20260101T000000Z "[herdr-orchestration run=w1:p1-20260101T000000Z task=fix-login from=fix-login kind=update reply-to=fix-login]
      Parser done, starting on tests"
      orch inbox add --run w1:p1-20260101T000000Z - < callback.txt
    """
    if text is None:
        raise OrchError("no message given", hint="pass the envelope as TEXT, or `-` to read it from stdin")
    read = None
    if not check and run_id:
        # A worker's callback (one message, a named run): the fast path, without pydantic (orchestrator.intake).
        from orchestrator.intake import render_added, take

        outcome = take(os.environ, run_id, text, sys.stdin.buffer, source=source)
        if outcome.added is not None:
            if as_json:
                echo_json({"run_id": outcome.added.run_id, "messages": [outcome.added.as_json()]})
            else:
                from packets.inert import inert

                click.echo(inert(render_added(outcome.added)), nl=False)
            return
        read = outcome.inbound  # what it read of stdin (or nothing): the full path below says what is wrong

    from orchestrator.handover import BATCH_MAX
    from orchestrator.inbox import Inbound, inbound_text, message_limit, read_inbound

    engine = engine_from(ctx)
    # A check-in acts on the run (answers, prompts): one driver at a time. Recording alone only appends to the
    # inbox, like a worker's callback, and never waits on or is refused by the run's driver.
    run = engine.drive_run(run_id) if check else engine.find_run(run_id)
    limit = message_limit(engine, run)
    # Both doors read the same bytes (orchestrator.intake): never more than BATCH_MAX times the limit.
    batch = limit * BATCH_MAX
    if read is not None:
        inbound = Inbound(text=read.text, size=read.size, sha256=read.sha256, complete=read.complete)
    else:
        inbound = read_inbound(sys.stdin.buffer, batch) if text == "-" else inbound_text(text, batch)
    if inbound.complete and not inbound.text.strip():
        # Nothing to judge: recording it would only add an empty kept-aside message to the inbox.
        raise OrchError("the message is empty", hint="pass the envelope as TEXT, or pipe it in: `orch inbox add --run RUN_ID - < callback.txt`")
    if check:
        from orchestrator.door import hand_over, render_handover  # the check-in reads herdr and plans: only when asked

        emit(hand_over(engine, run, inbound, source=source, limit=limit, as_json=as_json), as_json, render_handover)
    else:
        from orchestrator.handover import hand_over as record_all, render_handed

        emit(record_all(engine, run, inbound, source=source, limit=limit), as_json, render_handed)


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
    from orchestrator.inbox import list_messages, render_list

    engine = engine_from(ctx)
    emit(list_messages(engine, engine.find_run(run_id)), as_json, render_list)
