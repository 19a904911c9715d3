"""`orch inbox add|list`: hand a worker's callback to the ledger (validated, recorded once) and show every message's verdict."""

from __future__ import annotations

import os
import sys

from typing import TYPE_CHECKING

import click

from orchestrator.commands.base import echo_json, emit, engine_from, json_option, run_option
from orchestrator.errors import OrchError

if TYPE_CHECKING:
    from orchestrator.intake import Added


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
@click.option("--spool", is_flag=True, help="Keep it in this host's spool for the controller to collect (a worker on another host).")
@json_option
@click.argument("text", required=False)
@click.pass_context
def inbox_add(
    ctx: click.Context, run_id: str | None, source: str, check: bool, spool: bool, as_json: bool, text: str | None
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

    With `--spool` (a worker on another host; its packet says so), the message is only kept in this host's spool
    (`$ORCH_HOME/spool/<run>/`, written atomically), and the controller collects it over ssh at its next check-in.
    """
    if text is None:
        raise OrchError("no message given", hint="pass the envelope as TEXT, or `-` to read it from stdin")
    if spool:
        # A worker on another host: kept durably here, judged by the controller when it collects (orchestrator.spool).
        if not run_id or check:
            raise OrchError("--spool needs --run RUN_ID and takes no --check-in", hint="a remote worker's packet gives the exact command")
        from orchestrator.spool import render_spooled, spool_message

        ident = spool_message(os.environ, run_id, text, sys.stdin.buffer)
        if as_json:
            echo_json({"run_id": run_id, "spooled": ident})
        else:
            click.echo(render_spooled(ident, run_id), nl=False)
        return
    from orchestrator.intake import Added, Intake, Raw, read, take

    taken: Raw | None = None
    if not check and run_id:
        # A worker's callback (one message, a named run): the ledger opened from the environment, no engine, no
        # pydantic (the same `orchestrator.intake.take` the console script calls without click).
        outcome = take(os.environ, run_id, text, sys.stdin.buffer, source=source)
        if isinstance(outcome, Added):
            _emit_added(outcome, as_json)
            return
        taken = outcome  # what it read (an empty message), or nothing: the engine says what is wrong
    # No run named, a check-in, or something only the engine can say (no ledger, no such run, an old run's limit).
    engine = engine_from(ctx)
    # A check-in acts on the run (answers, prompts): one driver at a time. Recording alone only appends to the
    # inbox, like a worker's callback, and never waits on or is refused by the run's driver.
    run = engine.drive_run(run_id) if check else engine.find_run(run_id)
    intake = Intake.of(engine, run)
    inbound = taken if taken is not None else read(text, sys.stdin.buffer, intake.limit)
    if inbound.complete and not inbound.text.strip():
        # Nothing to judge: recording it would only add an empty kept-aside message to the inbox.
        raise OrchError("the message is empty", hint="pass the envelope as TEXT, or pipe it in: `orch inbox add --run RUN_ID - < callback.txt`")
    if check:
        from orchestrator.door import hand_over, render_handover  # the check-in reads herdr and plans: only when asked

        emit(hand_over(engine, run, inbound, source=source, limit=intake.limit, as_json=as_json), as_json, render_handover)
    else:
        _emit_added(intake.add(inbound, source=source), as_json)


def _emit_added(added: Added, as_json: bool) -> None:
    """`orch inbox add`'s answer: the verdict line, or `{"run_id", "messages": [...]}` (one message per call)."""
    from orchestrator.intake import render_added

    if as_json:
        echo_json({"run_id": added.run_id, "messages": [added.as_json()]})
    else:
        from packets.inert import inert

        click.echo(inert(render_added(added)), nl=False)


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


@inbox.command("spooled")
@click.option("--run", "run_id", required=True, help="The run whose spool to list.")
@json_option
def inbox_spooled(run_id: str, as_json: bool) -> None:
    """List the callbacks spooled on this host for a run, not yet collected by its controller (oldest 200 at most).

    The controller runs it over ssh at each check-in (`--json`: every message whole, in base64) and records each
    one in its ledger before it runs `orch inbox ack`; nothing here judges or removes anything.

    \b
    Example:
      orch inbox spooled --run w1:p1-20260101T000000Z
    """
    from orchestrator.locations import locations
    from orchestrator.spool import BATCH_BYTES, BATCH_ENTRIES, folder, pending

    # Oldest first, in batches (at most 200 entries or 8 MiB): the controller takes the rest at its next check-in.
    entries = pending(folder(locations(os.environ)["orch_home"], run_id), most=BATCH_ENTRIES, budget=BATCH_BYTES)
    if as_json:
        echo_json({"run_id": run_id, "messages": [e.as_json() for e in entries]})
        return
    click.echo(f"{len(entries)} spooled for run {run_id}")
    for entry in entries:
        click.echo(f"  {entry.id} ({entry.size} bytes)")


@inbox.command("ack")
@click.option("--run", "run_id", required=True, help="The run whose spool entries the controller has recorded.")
@json_option
@click.argument("ids", nargs=-1)
def inbox_ack(run_id: str, as_json: bool, ids: tuple[str, ...]) -> None:
    """Remove spooled callbacks the controller has recorded in its ledger (it runs this over ssh after the write).

    \b
    Example:
      orch inbox ack --run w1:p1-20260101T000000Z 01796512345678901234-4242-0a1b2c3d
    """
    from orchestrator.locations import locations
    from orchestrator.spool import ack, folder

    removed = ack(folder(locations(os.environ)["orch_home"], run_id), ids)
    if as_json:
        echo_json({"run_id": run_id, "acknowledged": removed, "named": len(ids)})
    else:
        click.echo(f"acknowledged {removed} of {len(ids)}")


@inbox.command("report")
@click.option("--root", "roots", multiple=True, required=True, help="A folder the worker may write reports in (repeatable).")
@click.option("--limit", type=click.IntRange(min=0), default=None, help="At most this many bytes (default 262144).")
@json_option
@click.argument("path")
def inbox_report(roots: tuple[str, ...], limit: int | None, as_json: bool, path: str) -> None:
    """Read a report file a remote worker named, on its host, as the controller reads a local one (run over ssh).

    The same reader as on the controller (inside the given roots, no symlink followed, a regular file, bounded, with
    a deadline); the roots are resolved on this host. `--json`: `{"text": ...}` or `{"reason": ...}`.

    \b
    Example:
      orch inbox report --root /srv/acme/widgets.worktrees/feat-a --json -- /srv/acme/widgets.worktrees/feat-a/REPORT.md
    """
    from orchestrator.reportfiles import REPORT_LIMIT_BYTES, open_report

    opened = open_report(path, [(root, os.path.realpath(root)) for root in roots], limit=REPORT_LIMIT_BYTES if limit is None else limit)
    if as_json:
        echo_json({"path": path, "text": opened.text, "reason": opened.reason})
    else:
        click.echo(opened.text if opened.text is not None else f"not read: {opened.reason}", nl=opened.text is None)
