"""`orch provision`: give every worker of a run its worktree tab or sibling pane and a ready agent."""

from __future__ import annotations

import sys

import click

from orchestrator.commands.base import emit_next, engine_from, json_option, run_option
from orchestrator.errors import ExitCode
from orchestrator.provision import provision as provision_run
from orchestrator.provision import render_provision


@click.command("provision")
@run_option
@json_option
@click.pass_context
def provision(ctx: click.Context, run_id: str | None, as_json: bool) -> None:
    """Provision the run's workers: worktree tabs and sibling panes, read back, agents started and ready.

    Safe to re-run: ready workers are skipped and nothing is created twice. Exits 1 when a worker is not ready.

    \b
    Example:
      orch provision
      orch provision --run w1:p1-20261130T080000Z --json
    """
    engine = engine_from(ctx)
    result = provision_run(engine, engine.drive_run(run_id))
    emit_next(engine, result.run_id, result, as_json, render_provision)
    if not result.ok:
        sys.exit(int(ExitCode.FAILURE))
