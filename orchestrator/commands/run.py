"""`orch run PLAN` and `orch resume [RUN_ID]`: the whole life of a plan in one process, with live progress."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from orchestrator.commands.base import emit, engine_from, json_option
from orchestrator.plan import load_plan
from orchestrator.progress import Progress
from orchestrator.report import render_report
from orchestrator.run import Decided, RunOutcome, record_decisions, resume_run, run_plan

_KEEP = click.option("--keep", "keep", multiple=True, metavar="TASK", help="Retain this worker (pane and worktree) at the end; repeatable.")
_INTERVAL = click.option(
    "--interval", "interval_s", type=click.FloatRange(min=0.1), metavar="SECONDS",
    help="Seconds between check-ins (default: the plan's defaults.checkin_interval_s).",
)  # fmt: skip


def _finish(ctx: click.Context, outcome: RunOutcome, as_json: bool) -> None:
    emit(outcome, as_json, lambda o: render_report(o.report))
    if not as_json:
        click.echo(f"Report: {engine_from(ctx).run_dir(outcome.run_id) / 'report.md'}", err=True)
    ctx.exit(outcome.exit_code)


@click.command("run")
@click.argument("plan_file", metavar="PLAN", type=click.Path(path_type=Path))
@_KEEP
@_INTERVAL
@json_option
@click.pass_context
def run(ctx: click.Context, plan_file: Path, keep: tuple[str, ...], interval_s: float | None, as_json: bool) -> None:
    """Run PLAN from preflight to report: provision, dispatch, observe, verify, integrate, retire.

    Progress goes to stderr (one live line per worker on a terminal, log lines otherwise); the compact
    report goes to stdout. Ctrl-C stops dispatching, leaves workers and evidence in place and records where
    it stopped; `orch resume` continues. A run whose remaining workers wait for you (a question the plan
    does not answer, a block) stops and says what is needed.

    Exit code: 0 PASS, 10 PARTIAL, 11 FAIL (1-4 for errors, 130 interrupted).

    \b
    Example:
      orch run plan.toml
      orch run plan.toml --keep api-docs --json > outcome.json
    """
    engine = engine_from(ctx)
    engine.controller = "run"
    engine.ledger_mode = "new-runs"  # it records a run: it may create the ledger
    # A person's first mistakes are in the plan: say those before anything about herdr.
    load_plan(plan_file, engine.settings)
    progress = Progress(sys.stderr)
    _finish(ctx, run_plan(engine, plan_file, progress, keep=keep, interval_s=interval_s), as_json)


def _decisions(ctx: click.Context, param: click.Parameter, values: tuple[str, ...]) -> dict[int, str]:
    found: dict[int, str] = {}
    for value in values:
        effect, sep, answer = value.partition("=")
        if not sep or not effect.isdigit() or answer not in ("sent", "unsent"):
            raise click.BadParameter(f"{value!r} is not ID=sent or ID=unsent")
        found[int(effect)] = answer
    return found


def _render_decided(decided: Decided) -> str:
    lines = [f"effect {effect_id}: recorded as {answer}" for effect_id, answer in decided.settled.items()]
    lines.append(f"run {decided.run_id} is driven by an agent controller: its next check-in (`{decided.next}`) settles them")
    return "\n".join(lines) + "\n"


@click.command("resume")
@click.argument("run_id", metavar="[RUN_ID]", required=False)
@_KEEP
@_INTERVAL
@click.option(
    "--settle", "decisions", multiple=True, metavar="ID=sent|unsent", callback=_decisions,
    help="Answer a question resume asked: whether the prompt of in-flight effect ID reached its agent; repeatable.",
)  # fmt: skip
@json_option
@click.pass_context
def resume(
    ctx: click.Context, run_id: str | None, keep: tuple[str, ...], interval_s: float | None, decisions: dict[int, str], as_json: bool
) -> None:
    """Continue an interrupted or crashed run from the ledger, repeating no create and no prompt.

    Side effects left in flight are settled by reading herdr and git back; finished steps are replayed from
    the ledger; the run then carries on to its report. Default: the newest unfinished run of this pane.

    \b
    Example:
      orch resume
      orch resume w1:p1-20261130T080000Z
    """
    engine = engine_from(ctx)
    if decisions:
        decided = record_decisions(engine, run_id, decisions)
        if decided is not None:  # an agent controller drives it: answers recorded, its door carries on
            emit(decided, as_json, _render_decided)
            return
    engine.controller = "run"
    progress = Progress(sys.stderr)
    _finish(ctx, resume_run(engine, run_id, progress, keep=keep, interval_s=interval_s, decisions=decisions), as_json)
