"""`orch cancel RUN`: give up a whole run (every worker abandoned through retire's ladder, every piece of work kept)."""

from __future__ import annotations

import click

from orchestrator.commands.base import emit, engine_from, json_option


@click.command("cancel")
@click.argument("run_id", metavar="RUN")
@click.option("--reason", metavar="TEXT", help="Why the run is given up (recorded in the ledger; default: cancelled).")
@json_option
@click.pass_context
def cancel(ctx: click.Context, run_id: str, reason: str | None, as_json: bool) -> None:
    """Give up RUN: stop and exit its agents, close the panes it created, keep every piece of work, report.

    Every worker not yet retired is abandoned with `orch retire`'s ladder: a busy agent gets a `stop`, an agent at
    rest its exit command, panes the run created are closed. A worktree is removed only when it holds nothing but
    commits on its own branch (the branch always stays); uncommitted or untracked work is kept and said. The run
    is then finished and its report written. Stop a running `orch run` (Ctrl-C) first.

    Exit code: the report's verdict: 0 PASS, 10 PARTIAL, 11 FAIL.

    \b
    Example:
      orch cancel w1:p1-20261130T080000Z
      orch cancel w1:p1-20261130T080000Z --reason "wrong base branch" --json
    """
    from orchestrator.cancel import DEFAULT_REASON, cancel_run, render_cancel

    engine = engine_from(ctx)
    result = cancel_run(engine, engine.drive_run(run_id, go_on=False), reason or DEFAULT_REASON)
    emit(result, as_json, render_cancel)
    ctx.exit(result.exit_code)
