"""`orch doctor PLAN --offline` with the real agents as a person installed them: their own model never asked, no token spent."""

from __future__ import annotations

import re
from collections.abc import Callable

import pytest
from real_world import START_TIMEOUT_S, RealWorld, lane_kinds

from herdr_sim import integrations
from herdr_sim.model.agents import AGENTS

pytestmark = pytest.mark.real_agents

HOOK = {target.name: f"current (v{target.version})" for target in integrations.targets()}
PLAN = """
organization = "acme"
repo = "widgets"
base = "main"

[[workers]]
task = "usage-docs"
kind = "{kind}"
objective = "Write a usage guide for the widgets package."
deliverable = "docs/usage.md committed on docs/usage."
branch = "docs/usage"
claim = ["docs/"]
verify = ["grep -q 'Python 3.11' docs/usage.md"]
"""
# What each kind shows at its first start in the probe's scratch worktree, and the keys orch answered it with.
DIALOG = {"claude": "trust folder, answered with down enter", "codex": "trust folder, answered with enter", "opencode": "none", "pi": "none"}


def as_installed(world: RealWorld, kind: str) -> None:
    """The pane's `<kind>` becomes the installed agent itself, as on a person's machine: no home or model of the lane's."""
    launcher = world.launchers / kind
    exe = re.search(r"^exec (\S+)", launcher.read_text(), re.MULTILINE)
    assert exe is not None, launcher.read_text()
    launcher.write_text(f"#!/bin/sh\n# {AGENTS[kind].package}@{AGENTS[kind].version}, as installed\nunset TMUX TMUX_PANE\nexec {exe.group(1)} \"$@\"\n")


@pytest.mark.parametrize("kind", lane_kinds("pi", "claude", "codex", "opencode"))
def test_doctor_offline_passes_with_the_installed_agent_on_the_scripted_model(real_world: Callable[..., RealWorld], kind: str) -> None:
    world = real_world(kind)
    as_installed(world, kind)
    plan = world.write_plan(PLAN.format(kind=kind).replace("[[workers]]", f"[defaults]\nagent_start_timeout_s = {START_TIMEOUT_S[kind]}\n\n[[workers]]") if kind in START_TIMEOUT_S else PLAN.format(kind=kind))

    done = world.orch("doctor", str(plan), "--offline")

    text = re.sub(r" in [0-9]+\.[0-9]s$", " in T", done.stdout, flags=re.MULTILINE)
    asked = re.search(r"^  scripted model: ([0-9]+) requests?$", text, re.MULTILINE)
    assert asked is not None and int(asked.group(1)) >= 2, text  # the probe, then the turn after its callback
    assert (done.returncode, done.stderr, text.replace(asked.group(0), "  scripted model: N requests")) == (0, "", (
        f"orch doctor {plan}: 1 agent kind, offline on the scripted model (no tokens spent)\n"
        f"{kind}: PASS in T\n"
        f"  installed: yes (`{kind}`)\n"
        f"  integration: {HOOK[kind]}\n"
        f"  trust dialog: {DIALOG[kind]}\n"
        "  prompt: accepted\n"
        "  callback: update #1 accepted\n"
        "  scripted model: N requests\n"
        "  cleanup: agent exited, workspace closed, scratch worktree removed\n"
        f"doctor: every agent kind passed ({kind}); the fleet can start\n"
    )), world.diagnose(done)
    # Nothing is left: no agent of this world's panes, and the lane's own model was never asked (doctor's was).
    assert world.pane_processes(kind) == [], world.diagnose(done)
    assert world.model.requests() == [], "the lane's own model was asked: the probe did not run on doctor's"
