"""`orch preflight PLAN`: check the herdr session, the repo workspace and tab, and create a run (spec §1)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import click

from orchestrator.commands.base import echo_json, emit, engine_from, json_option
from orchestrator.preflight import preflight as run_preflight
from orchestrator.preflight import render_preflight


@click.command("preflight")
@click.argument("plan_file", metavar="PLAN", type=click.Path(path_type=Path))
@json_option
@click.pass_context
def preflight(ctx: click.Context, plan_file: Path, as_json: bool) -> None:
    """Check that this herdr pane can run PLAN, then create a run and print its id last.

    Gates, in order, stopping at the first failure: HERDR_ENV, the plan, herdr, its commands, the server, the
    session (must be the plan's organization), integrations for every worker kind, the caller pane, running
    agents, the repo checkout and default branch, the base ref. Then it finds (or creates, without focus) the
    repo workspace, labels its first tab <repo>, and records the run and its workers (state provisioning).
    Nothing is created when a gate before the workspace fails. Exit 1 on failure; 3 when herdr cannot be run
    or its server is not running.

    Every preflight creates a NEW run (a run is one orchestration). To continue an existing run, do not
    preflight again: pass its id on, e.g. `orch provision --run RUN_ID`. With --json, `next[]` says that step
    (empty when preflight failed: do what `failure.hint` says, then preflight again).

    \b
    Example:
      orch preflight plan.toml
      orch preflight plan.toml --json
    """
    from orchestrator.cli import with_caller_flags
    from orchestrator.door import after_preflight, render_next

    engine = engine_from(ctx)
    engine.ledger_mode = "new-runs"  # the one door that records a run may create the ledger
    # Two preflights of one plan in one pane at the same instant would each make a run of it: the second is refused
    # naming the first, as a second `orch run` is (Engine.hold_start), until this one's run is recorded.
    engine.hold_start(plan_file)
    try:
        result = run_preflight(engine, plan_file)
    finally:
        engine.started()
    steps = after_preflight(result.run_id if result.ok else None, as_json=as_json)
    if as_json:
        if result.failure is not None:  # its hint's commands carry the caller's --json, as every failure's do
            result = result.model_copy(update={"failure": result.failure.model_copy(update={"hint": with_caller_flags(result.failure.hint)})})
        echo_json({**result.model_dump(mode="json"), "next": [s.model_dump(mode="json") for s in steps]})
    else:
        stdout = sys.stdout
        symbols = stdout.isatty() and not os.environ.get("NO_COLOR")
        emit(result, as_json, lambda r: render_preflight(r, symbols=symbols))
        # The run id stays the last line of stdout (`RUN=$(orch preflight plan.toml | tail -n 1)`): the step goes to stderr.
        for line in render_next(steps):
            click.echo(line, err=True)
    if result.failure is not None:
        raise result.failure.error()
