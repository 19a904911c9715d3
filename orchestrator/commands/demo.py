"""`orch demo`: a 3-worker plan from preflight to report on a private simulated herdr, cleaned up afterwards."""

from __future__ import annotations

import sys

import click

from orchestrator.commands.base import echo_json


@click.command("demo")
@click.option(
    "--keep-going", is_flag=True,
    help="After the report, leave the simulated herdr and the demo repository running to look around (prints how to stop them).",
)  # fmt: skip
@click.option(
    "--hosts", is_flag=True,
    help="Run one of the three workers on a second simulated host, a build box reached as a herdr saved machine and over a simulated ssh.",
)  # fmt: skip
@click.option("--json", "as_json", is_flag=True, help="Print the outcome as JSON on stdout (the narrative goes to stderr).")
@click.pass_context
def demo(ctx: click.Context, keep_going: bool, hosts: bool, as_json: bool) -> None:
    """Watch orch run three scripted workers on a simulated herdr, then remove everything it started.

    Builds a throwaway git repository (a tiny Python package), starts a private simulated herdr (its own
    tmux server; scripted stand-ins for codex, claude and pi with herdr's real 3 s start-up), and runs a
    plan through the real `orch run` engine: two workers in their own worktrees, one sibling pane, one
    question answered by the plan. Live progress goes to stderr, the report to stdout. Your herdr, tmux
    and repositories are never touched. The run's ledger and report stay in $ORCH_HOME/demo
    (default ~/.local/state/orch/demo). Works without a terminal.

    With --hosts the same plan runs across two simulated hosts: the docs worker on a build box with its own
    simulated herdr (ids colliding with the controller's), its callbacks spooled there and collected over ssh,
    its commit fetched home by SHA, verified and integrated on the controller, and retired on the box.

    Exit code: 0 PASS, 10 PARTIAL, 11 FAIL (1 when the clean-up failed, 130 interrupted).

    \b
    Example:
      orch demo
      orch demo --json > outcome.json
      orch demo --hosts
    """

    # Imported here: the simulator is loaded by `orch demo` and by no other command.
    from orchestrator.demo import closing_lines, run_demo
    from orchestrator.report import render_report
    from packets.inert import inert

    def say(line: str) -> None:
        click.echo(inert(line), err=as_json)

    outcome = run_demo(out=say, progress_stream=sys.stderr, keep_going=keep_going, hosts=hosts)
    if as_json:
        echo_json(outcome.model_dump(mode="json"))
        for line in closing_lines(outcome):
            click.echo(inert(line), err=True)
    else:
        click.echo(inert(render_report(outcome.report)), nl=False)
        for line in closing_lines(outcome):
            click.echo(inert(line))
    ctx.exit(outcome.exit_code)
