"""Scripted stand-ins for coding agents (codex, claude, opencode, pi) that run inside simulated herdr panes."""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

from herdr_sim.agent.console import Console
from herdr_sim.agent.scenario import Behaviour, ScenarioError, load_behaviour
from herdr_sim.agent.screens import paste_placeholder
from herdr_sim.agent.worker import Agent, AgentCrash

KINDS = ("codex", "claude", "opencode", "pi")
DELAY_FLAG = "--sim-start-delay-ms"
DIALOG_FLAG = "--sim-start-dialog"


def start_delay_ms(argv: list[str], env: dict[str, str]) -> int:
    """A slow start: `--sim-start-delay-ms N` in the agent's argv, else $HERDR_SIM_AGENT_START_DELAY_MS, else 0."""
    raw = env.get("HERDR_SIM_AGENT_START_DELAY_MS", "0")
    for i, arg in enumerate(argv):
        if arg == DELAY_FLAG and i + 1 < len(argv):
            raw = argv[i + 1]
        elif arg.startswith(DELAY_FLAG + "="):
            raw = arg.split("=", 1)[1]
    return int(raw) if raw.isdigit() else 0


def start_dialog(argv: list[str], env: dict[str, str]) -> str | None:
    """A dialog shown at start-up (a trust prompt): `--sim-start-dialog TEXT`, else $HERDR_SIM_AGENT_START_DIALOG."""
    text = env.get("HERDR_SIM_AGENT_START_DIALOG") or None
    for i, arg in enumerate(argv):
        if arg == DIALOG_FLAG and i + 1 < len(argv):
            text = argv[i + 1]
        elif arg.startswith(DIALOG_FLAG + "="):
            text = arg.split("=", 1)[1]
    return text


def _log_path(env: dict[str, str]) -> Path | None:
    home, pane = env.get("HERDR_SIM_HOME"), env.get("HERDR_PANE_ID")
    if not home or not pane:
        return None
    return Path(home) / "agents" / f"{re.sub(r'[^A-Za-z0-9._-]', '_', pane)}.log"


def main(kind: str) -> None:
    """Run the scripted agent of this kind on the current tty until its exit command (`/exit`; pi: `/quit`), Ctrl-C at the prompt, or a scripted crash."""
    env = dict(os.environ)
    problem = None
    try:
        behaviour = load_behaviour(env, kind)
    except ScenarioError as exc:
        behaviour, problem = Behaviour(), str(exc)
    placeholder = (lambda text, count: paste_placeholder(kind, text, count)) if behaviour.paste_collapse else None
    console = Console(_log_path(env), placeholder)
    with console:
        if problem:
            console.say(f"Scenario error: {problem}")
        try:
            code = Agent(kind, env, console, start_delay_ms=start_delay_ms(sys.argv[1:], env), behaviour=behaviour,
                         start_dialog=start_dialog(sys.argv[1:], env)).run()
        except AgentCrash as crash:
            code = crash.exit_code
    sys.exit(code)
