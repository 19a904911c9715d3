"""`orch finish`: integrate, retire and report in one call; the run ends once nothing waits on the person."""

from __future__ import annotations

import click

from orchestrator.commands.base import emit, engine_from, json_option, run_option
from orchestrator.door import finish_run, render_finished
from orchestrator.errors import OrchError


@click.command("finish")
@run_option
@click.option("--keep", multiple=True, metavar="TASK", help="Keep this worker (pane and worktree) instead of retiring it; repeatable.")
@click.option("--abandon", multiple=True, metavar="TASK", help="Give up this worker's work, even one waiting on a decision (needs --reason).")
@click.option("--reason", metavar="TEXT", help="Why the --abandon tasks are given up (recorded in the ledger).")
@json_option
@click.pass_context
def finish(ctx: click.Context, run_id: str | None, keep: tuple[str, ...], abandon: tuple[str, ...], reason: str | None, as_json: bool) -> None:
    """Finish a run: integrate accepted work, retire finished workers, write the final report.

    Workers that wait on the person (an open question, a block, a verification block) keep their agent, pane and
    worktree; `waiting` lists each with the commands that decide it, and the run stays open (call again once
    decided). With nothing waiting the run is marked finished. The JSON holds every step's result and the compact
    report (`report_text`). Refused (exit 1, nothing changed) while a worker still works or a result is not verified.

    Exit code: 0 PASS, 10 PARTIAL, 11 FAIL.

    \b
    Example:
      orch finish
      orch finish --run w1:p1-20261130T080000Z --abandon deploy --reason "no token will be issued" --json
    """
    if abandon and not reason:
        raise OrchError("--abandon needs --reason: say why the work is given up")
    if reason and not abandon:
        raise OrchError("--reason goes with --abandon TASK")
    engine = engine_from(ctx)
    result = finish_run(engine, engine.drive_run(run_id), keep=keep, abandon={task: reason or "" for task in abandon}, as_json=as_json)
    emit(result, as_json, render_finished)
    ctx.exit(result.exit_code)
