"""`orch retire`: run the stop ladder on the run's finished workers and say what was closed and what was kept."""

from __future__ import annotations

import click

from orchestrator.commands.base import emit, engine_from, json_option, run_option
from orchestrator.errors import OrchError
from orchestrator.retire import render_retire, retire as retire_run


@click.command("retire")
@run_option
@click.option("--task", "tasks", multiple=True, metavar="TASK", help="Retire only this task (repeatable; default: every worker).")
@click.option("--keep", multiple=True, metavar="TASK", help="Keep this worker: it becomes retained (\"kept on request\").")
@click.option("--abandon", multiple=True, metavar="TASK", help="Give up this worker's work, even unfinished (needs --reason).")
@click.option("--reason", metavar="TEXT", help="Why the --abandon tasks are abandoned (recorded in the ledger).")
@json_option
@click.pass_context
def retire(ctx: click.Context, run_id: str | None, tasks: tuple[str, ...], keep: tuple[str, ...], abandon: tuple[str, ...], reason: str | None, as_json: bool) -> None:
    """Exit finished workers' agents, close the panes and remove the worktrees the run created.

    A worker is retired only once its report and disposition are recorded (accepted, rejected, superseded,
    blocked, failed). Anything that holds work (uncommitted changes, untracked files, commits no other ref has),
    and anything the run did not create, is kept and reported with the reason.

    \b
    Example:
      orch retire
      orch retire --task feature-a --keep feature-b
      orch retire --abandon feature-c --reason "approach dropped" --json
    """
    if abandon and not reason:
        raise OrchError("--abandon needs --reason: say why the work is given up")
    if reason and not abandon:
        raise OrchError("--reason goes with --abandon TASK")
    engine = engine_from(ctx)
    run = engine.drive_run(run_id)
    result = retire_run(engine, run, tasks=list(tasks) or None, keep=keep, abandon={task: reason or "" for task in abandon})
    emit(result, as_json, render_retire)
