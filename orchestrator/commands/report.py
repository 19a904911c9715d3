"""`orch report` and `orch status`: read-only views of a run computed from the ledger."""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

import click

from orchestrator.commands.base import emit, engine_from, json_option, run_option
from orchestrator.errors import OrchError

if TYPE_CHECKING:
    from orchestrator.engine import Engine
    from registry import Run


def pick_run(engine: Engine, run_id: str | None) -> Run:
    """The named run; else the newest unfinished run of this pane; else (a run already over) the newest run at all."""
    if run_id is not None:
        return engine.find_run(run_id)
    try:
        return engine.find_run(None)
    except OrchError:
        runs = engine.ledger.list_runs()
        if not runs:
            raise OrchError(f"no run in {engine.ledger_path}", hint="start one with `orch run PLAN` (step by step: `orch preflight PLAN`)") from None
        mine = [r for r in runs if r.controller_target == engine.env.get("HERDR_PANE_ID")]
        return max(mine or runs, key=lambda r: r.created_at)


@click.command("report")
@run_option
@json_option
@click.option("--markdown", "as_markdown", is_flag=True, help="Print the Markdown report (the text of report.md) instead.")
@click.pass_context
def report(ctx: click.Context, run_id: str | None, as_json: bool, as_markdown: bool) -> None:
    """Report a run's verdict from the ledger and write it to the run's report.md.

    Exit code: 0 PASS, 10 PARTIAL, 11 FAIL.

    \b
    Example:
      orch report
      orch report --run w1:p1-20260101T000000Z --json
    """
    from orchestrator.report import render_report, write_report  # not loaded by `orch status`

    if as_json and as_markdown:
        raise click.UsageError("--json and --markdown are exclusive")
    engine = engine_from(ctx)
    run = pick_run(engine, run_id)
    result, markdown = write_report(engine, run)
    if as_markdown:
        from packets.inert import inert

        click.echo(inert(markdown), nl=False)
    else:
        emit(result, as_json, render_report)
    ctx.exit(result.exit_code)


@click.command("status")
@run_option
@click.option("--all", "all_runs", is_flag=True, help="List every run in the ledger instead.")
@json_option
@click.pass_context
def status(ctx: click.Context, run_id: str | None, all_runs: bool, as_json: bool) -> None:
    """Show where a run and each of its workers stand (or list every run with --all).

    \b
    Example:
      orch status
      orch status --all --json
    """
    from orchestrator.status import build_run_list, build_status, render_run_list, render_status
    from orchestrator.tables import terminal_width

    engine = engine_from(ctx)
    if all_runs:
        if run_id is not None:
            raise click.UsageError("--all and --run are exclusive")
        if not engine.has_ledger():  # nothing recorded yet: an empty list, and no ledger created for it
            from orchestrator.status import RunList

            emit(RunList(runs=()), as_json, functools.partial(render_run_list, width=terminal_width()))
            return
        emit(build_run_list(engine.ledger), as_json, functools.partial(render_run_list, width=terminal_width()))
        return
    run = pick_run(engine, run_id)
    emit(build_status(engine.ledger, run.run_id, engine.clock.now()), as_json, functools.partial(render_status, width=terminal_width()))

