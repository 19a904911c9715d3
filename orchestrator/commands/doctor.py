"""`orch doctor PLAN`: one probe agent per kind the plan uses, from start to a validated callback, before the fleet."""

from __future__ import annotations

from pathlib import Path

import click

from orchestrator.commands.base import emit, engine_from, json_option
from orchestrator.doctor import DEFAULT_CALLBACK_TIMEOUT_S, render_doctor
from orchestrator.doctor import doctor as run_doctor


@click.command("doctor")
@click.argument("plan_file", metavar="PLAN", type=click.Path(path_type=Path))
@click.option("--timeout", "timeout_s", type=click.IntRange(1, 3600), default=DEFAULT_CALLBACK_TIMEOUT_S, show_default=True,
              metavar="SECONDS", help="How long each probe may take to call back.")  # fmt: skip
@click.option("--offline", is_flag=True, help="Point each probe agent at orch's scripted model on 127.0.0.1 instead of its provider: no token spent.")
@json_option
@click.pass_context
def doctor(ctx: click.Context, plan_file: Path, timeout_s: int, offline: bool, as_json: bool) -> None:
    """Before a fleet: prove that every agent kind PLAN uses starts, takes a prompt and calls back.

    For each kind, one after another: its executable on PATH, its herdr integration, then one agent in a detached
    scratch worktree (in a temp dir, never your checkout) in a workspace of its own, its trust dialog answered as the
    plan's policy says, a prompt whose only step is one message through the Message Contract, and that message
    validated by `orch inbox add` against a private probe ledger. Then the agent exits, its workspace closes and the
    scratch worktree is removed. Your ledger and checkout are not touched. Exit 0 when every kind passed, 1 with one
    `orch:` line per failed kind otherwise.

    With --offline the probe agents (your installed claude, codex, opencode or pi) talk to orch's scripted model on
    127.0.0.1, which answers the probe by running its callback through the agent's own shell tool: trust dialogs,
    the herdr integration and the callback path are checked without spending a token. Each agent reads a private
    configuration through its own config-dir variable (CLAUDE_CONFIG_DIR, CODEX_HOME, OPENCODE_CONFIG,
    PI_CODING_AGENT_DIR), so your agent settings are neither used nor changed; without --offline the probe is live.

    \b
    Example:
      orch doctor plan.toml
      orch doctor plan.toml --offline
      orch doctor plan.toml --json --timeout 120
    """
    engine = engine_from(ctx)
    result = run_doctor(engine, plan_file, callback_timeout_s=timeout_s, offline=offline)
    if as_json and result.failure is not None:
        # The document's hints in the caller's form, as the stderr hint line is (one form per step).
        from orchestrator.cli import with_caller_flags

        kinds = tuple(k.model_copy(update={"hint": with_caller_flags(k.hint)}) for k in result.kinds)
        result = result.model_copy(update={"kinds": kinds, "failure": result.failure.model_copy(update={"hint": with_caller_flags(result.failure.hint)})})
    emit(result, as_json, render_doctor)
    if result.failure is not None:
        raise result.error()
