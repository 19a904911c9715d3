"""`orch verify` and `orch integrate`: evidence-backed dispositions for results, then serial integration (or a report)."""

from __future__ import annotations

import click

from orchestrator.commands.base import emit, emit_next, engine_from, json_option, run_option
from orchestrator.errors import ExitCode, OrchError
from orchestrator.integrate import integrate_run, render_integrate
from orchestrator.verify import render_verify, supersede, verify_run


@click.command("verify")
@run_option
@click.option("--task", "tasks", multiple=True, metavar="TASK", help="Verify only this task (repeatable; default: every worker with a result).")
@click.option("--supersede", "superseded", metavar="TASK", help="Record that TASK's work was replaced (needs --reason); nothing is checked or merged.")
@click.option("--reason", metavar="TEXT", help="Why TASK is superseded (recorded in the ledger as the evidence).")
@json_option
@click.pass_context
def verify(ctx: click.Context, run_id: str | None, tasks: tuple[str, ...], superseded: str | None, reason: str | None, as_json: bool) -> None:
    """Verify workers' results without touching their worktrees and record accepted, rejected or blocked.

    For each worker with a result: re-open the files it cites at its commit, compare its diff with its file
    claim and its claimed commits with git log, and re-run the plan's verification commands in a scratch
    checkout of its branch head. Edits outside the claim, or checks that cannot run, block the worker and
    pause integration until a person decides. Exit 0 whatever the dispositions (they are the result).

    \b
    Example:
      orch verify
      orch verify --task api-docs --json
      orch verify --supersede greeting --reason "upstream shipped the same greeting"
    """
    if superseded and tasks:
        raise OrchError("--supersede TASK records a decision; do not combine it with --task")
    if reason is not None and not superseded:
        raise OrchError("--reason goes with --supersede TASK")
    if superseded and reason is None:
        raise OrchError("--supersede needs a --reason saying what replaced the work")
    engine = engine_from(ctx)
    run = engine.drive_run(run_id)
    if superseded:
        result = supersede(engine, run, superseded, reason or "")
    else:
        result = verify_run(engine, run, list(tasks) or None)
    emit_next(engine, run.run_id, result, as_json, render_verify)


@click.command("integrate")
@run_option
@json_option
@click.pass_context
def integrate(ctx: click.Context, run_id: str | None, as_json: bool) -> None:
    """Report accepted branches and SHAs, or (plan `[integration] enabled = true`) merge them one at a time.

    Merges go into the plan's integration branch, checked out in a worktree of its own under the run's folder
    (created from the run's base SHA when missing), in plan order, each with `git merge --no-ff` of the verified
    head and proved by `git merge-base --is-ancestor` before the ledger records it. A conflict aborts that merge
    and stops there; a worker blocked by verification holds back the accepted work that touches the same files.
    Never pushes, never touches your checkout or branch. Exit 1 when work is held back or a conflict stopped it:
    the result is still printed, and stderr (`failure` under --json) says why and what to do.

    \b
    Example:
      orch integrate
      orch integrate --run w1:p1-20261130T080000Z --json
    """
    engine = engine_from(ctx)
    result = integrate_run(engine, engine.drive_run(run_id))
    emit(result, as_json, render_integrate)
    if result.failure is not None:
        click.echo(f"orch: {result.failure.reason}", err=True)
        click.echo(f"hint: {result.failure.hint}", err=True)
        ctx.exit(int(ExitCode.FAILURE))
