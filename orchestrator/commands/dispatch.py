"""`orch dispatch` (send each ready worker its packet once, confirm acceptance) and `orch packet show` (the packet as it will be sent)."""

from __future__ import annotations

import dataclasses
import functools

import click

from orchestrator.briefing import brief
from orchestrator.commands.base import echo_json, emit_next, engine_from, json_option, run_option
from orchestrator.dispatch import dispatch as dispatch_phase
from orchestrator.dispatch import render_dispatch
from orchestrator.tables import terminal_width
from orchestrator.errors import ExitCode


@click.command("dispatch")
@run_option
@click.option("--task", "tasks", multiple=True, metavar="TASK", help="Only this task (repeatable; default: every worker of the run).")
@json_option
@click.pass_context
def dispatch(ctx: click.Context, run_id: str | None, tasks: tuple[str, ...], as_json: bool) -> None:
    """Send each ready worker its delegation packet once and confirm it was accepted.

    A worker whose packet was already sent is never sent it again: a stalled or unknown prompt is diagnosed from
    one read of its pane and left for you. Exits 1 when any worker failed, stalled or has an unknown outcome.

    \b
    Example:
      orch dispatch
      orch dispatch --task api-tests --json
    """
    engine = engine_from(ctx)
    run = engine.drive_run(run_id)
    result = dispatch_phase(engine, run, tasks or None)
    emit_next(engine, run.run_id, result, as_json, functools.partial(render_dispatch, width=terminal_width()))
    if not result.ok:
        ctx.exit(int(ExitCode.FAILURE))


@click.group("packet")
def packet() -> None:
    """Inspect delegation packets.

    \b
    Example:
      orch packet show api-tests --json
    """


@packet.command("show")
@click.argument("task")
@run_option
@json_option
@click.pass_context
def packet_show(ctx: click.Context, task: str, run_id: str | None, as_json: bool) -> None:
    """Print TASK's delegation packet exactly as `orch dispatch` sends it; nothing is saved or sent.

    \b
    Example:
      orch packet show api-tests
    """
    engine = engine_from(ctx)
    run = engine.find_run(run_id)
    briefing = brief(engine, run, task, save=False)
    if as_json:
        doc = {"task": task, "path": str(briefing.path), "bytes": briefing.size, "sha256": briefing.sha256,
               "moved": {k: str(v) for k, v in briefing.moved.items()}, "packet": dataclasses.asdict(briefing.packet), "text": briefing.text}
        echo_json(doc)
    else:
        click.echo(briefing.text, nl=False)
