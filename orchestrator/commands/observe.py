"""`orch wait`, `orch observe`, `orch answer`, `orch send`, `orch approve`: check-ins, messages to one worker, answers to its agent's forms."""

from __future__ import annotations

import click

from orchestrator.commands.base import emit, emit_next, engine_from, json_option, run_option
from orchestrator.messages import SentMessage, send_message
from orchestrator.observe import DEFAULT_INTERVAL_S, observe as observe_run, render_observe


@click.command("wait")
@run_option
@click.option(
    "--timeout", "timeout_s", type=click.FloatRange(min=0), default=None, metavar="SECONDS",
    help="Return after this long at the latest (default 60: below an agent's tool-call limit).",
)  # fmt: skip
@json_option
@click.pass_context
def wait(ctx: click.Context, run_id: str | None, timeout_s: float | None, as_json: bool) -> None:
    """Wait until something needs the controller, checking in whenever one is owed; then say what to do next.

    Returns as soon as a check-in finds a callback, a decision, a verdict or a failure, or nothing is left to wait
    for, and at the latest after --timeout. Meanwhile it checks in as the plan's `checkin_interval_s` says: callbacks
    are acted on, results verified, queued workers started, a silent worker asked for its result and failed on time.
    `woke` says why it returned; run `next[].command` as printed.

    \b
    Example:
      orch wait --run w1:p1-20261130T080000Z --json
    """
    from orchestrator.door import WAIT_S, render_waited, wait_run

    engine = engine_from(ctx)
    result = wait_run(engine, engine.find_run(run_id), timeout_s=WAIT_S if timeout_s is None else timeout_s, as_json=as_json)
    emit(result, as_json, render_waited)


@click.command("observe")
@run_option
@click.option("--once", is_flag=True, help="Run one check-in (acting on everything it finds) and stop.")
@click.option("--interval", type=click.FloatRange(min=0), default=DEFAULT_INTERVAL_S, show_default=True, help="Seconds between check-ins.")
@click.option("--max-rounds", type=click.IntRange(min=1), default=None, help="Stop after this many rounds.")
@json_option
@click.pass_context
def observe(ctx: click.Context, run_id: str | None, once: bool, interval: float, max_rounds: int | None, as_json: bool) -> None:
    """Act on callbacks and check on every dispatched worker until none is still working on its own.

    Questions the plan answers are answered; other questions and blocks are listed for you; a settled
    worker without a result is asked once for it; a worker fails only on the spec's evidence. With --once, one
    check-in that also verifies the results it received and starts queued workers, then `next` (as `orch wait`).

    \b
    Example:
      orch observe --once --json
    """
    engine = engine_from(ctx)
    run = engine.drive_run(run_id)
    if once:
        from orchestrator.door import observe_once, render_checked_in

        emit(observe_once(engine, run, as_json=as_json), as_json, render_checked_in)
        return
    result = observe_run(engine, run, interval=interval, max_rounds=max_rounds)
    emit_next(engine, run.run_id, result, as_json, render_observe)


def _render_sent(sent: SentMessage) -> str:
    return f"sent {sent.kind} to {sent.task} at {sent.target} (submitted; worker {sent.state})\n"


@click.command("answer")
@run_option
@json_option
@click.argument("task")
@click.argument("text")
@click.pass_context
def answer(ctx: click.Context, run_id: str | None, as_json: bool, task: str, text: str) -> None:
    """Answer TASK's pending question or block with TEXT (to an idle or done worker).

    TEXT that starts with `-` goes after `--`, as every command orch prints puts it.

    \b
    Example:
      orch answer fix-login "Keep English only."
      orch answer fix-login -- "-1 means no limit; use 50."
    """
    engine = engine_from(ctx)
    run = engine.drive_run(run_id)
    emit_next(engine, run.run_id, send_message(engine, run, task, "answer", text), as_json, _render_sent)


@click.command("send")
@run_option
@click.option("--kind", type=click.Choice(["follow-up", "stop"]), required=True, help="Message kind.")
@click.option("--urgent", is_flag=True, help="A scope correction: a follow-up that may interrupt a working worker.")
@json_option
@click.argument("task")
@click.argument("text")
@click.pass_context
def send(ctx: click.Context, run_id: str | None, kind: str, urgent: bool, as_json: bool, task: str, text: str) -> None:
    """Send a follow-up or a stop to TASK's worker (a stop, or an --urgent follow-up, may interrupt it while working).

    \b
    Example:
      orch send fix-login --kind stop "Scope changed; stop and report what you have."
    """
    engine = engine_from(ctx)
    run = engine.drive_run(run_id)
    sent = send_message(engine, run, task, "follow-up" if kind == "follow-up" else "stop", text, urgent=urgent)
    emit_next(engine, run.run_id, sent, as_json, _render_sent)


@click.command("approve")
@run_option
@click.option("--deny", is_flag=True, help="Decline instead: the agent's own cancel key.")
@json_option
@click.argument("task")
@click.pass_context
def approve(ctx: click.Context, run_id: str | None, deny: bool, as_json: bool, task: str) -> None:
    """Answer the approval form TASK's agent waits at, with that agent's own keys (orch never approves on its own).

    \b
    Example:
      orch approve fix-login
      orch approve fix-login --deny
    """
    from orchestrator.dialogs import approve as approve_form, render_approved

    engine = engine_from(ctx)
    run = engine.drive_run(run_id)
    emit_next(engine, run.run_id, approve_form(engine, run, task, "deny" if deny else "approve"), as_json, render_approved)
