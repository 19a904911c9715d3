"""The live lane rehearsed: ORCH_HERDR naming the simulator's `herdr` runs the lane's tests through the live path."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from herdr_sim.testing import SimServer

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]
LANE = ["tests/e2e/test_live_herdr.py", "tests/e2e/test_world.py", "tests/e2e/test_preflight.py::test_outside_herdr_stops_before_touching_anything",
        # with scripted agents:
        "tests/e2e/test_read_only.py", "tests/e2e/test_dispatch.py", "tests/e2e/test_run.py", "tests/e2e/test_provision.py", "tests/e2e/test_retire.py",
        "tests/e2e/test_run_verify.py", "tests/e2e/test_run_observe.py"]
SIMULATOR_ONLY = "tests/e2e/test_verify.py"  # skipped in the lane, with the reason
AGENT_SCRIPTS = ("codex", "claude", "opencode", "pi", "gemini", "cursor-agent", "amp", "droid")  # herdr_sim.server's


def _lane(tmp_path: Path, tests: list[str], *, agents_on_path: bool) -> tuple[subprocess.CompletedProcess[str], list[str], str]:
    """As a person would run it (a shell in a pane of session `acme`, ORCH_HERDR=$(command -v herdr)), with the
    simulator standing in for the real herdr: no SimServer of the tests' own, the worlds are built on that server.
    ``agents_on_path``: the session was started as the README says, with the scripted agents' dir first on its PATH."""
    home = Path("/tmp") / f"orch-e2e-{os.getpid()}-lane"
    overrides = {"HERDR_SIM_SETTLE_MS": "300"}
    if agents_on_path:
        agents = tmp_path / "agents"
        made = subprocess.run([sys.executable, "-m", "herdr_sim.agent.bin", str(agents)], capture_output=True, text=True, timeout=60)
        assert made.returncode == 0, made.stderr
        assert made.stdout.splitlines()[-1] == f"PATH={agents}:$PATH herdr --session acme"
        overrides["PATH"] = f"{agents}:{os.environ['PATH']}"
    try:
        with SimServer(home, overrides, session="acme") as sim:
            if agents_on_path:
                # A machine with herdr installed has no `codex` of the simulator's: only the README's PATH line finds one.
                for kind in AGENT_SCRIPTS:
                    (sim.paths.bin / kind).unlink()
            pane = json.loads(sim.run(["workspace", "create", "--cwd", str(tmp_path), "--no-focus"]).stdout)["result"]["root_pane"]
            env = {**sim.env(), "HERDR_ENV": "1", "HERDR_PANE_ID": pane["pane_id"], "ORCH_HERDR": str(sim.paths.bin / "herdr")}
            done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", *tests],
                                  cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
            # Every workspace the lane made is closed again: only the shell's own is left.
            left = [w["workspace_id"] for w in json.loads(sim.run(["workspace", "list"]).stdout)["result"]["workspaces"]]
    finally:
        shutil.rmtree(home, ignore_errors=True)
    assert left == [pane["workspace_id"]], done.stdout[-3000:]
    return done, left, done.stdout.strip().splitlines()[-1]


def test_orch_herdr_runs_the_marked_scenarios_against_that_herdr_and_skips_the_rest(tmp_path: Path) -> None:
    done, _, summary = _lane(tmp_path, [*LANE, SIMULATOR_ONLY], agents_on_path=True)

    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert re.fullmatch(r"17 passed, 25 skipped in [\d.]+s.*", summary), done.stdout[-3000:] + done.stderr[-2000:]
    assert "needs the simulator (its faults, knobs or state): the live lane (ORCH_HERDR) runs only the tests marked live_herdr" in done.stdout


def test_scenarios_with_scripted_agents_skip_when_the_live_panes_do_not_find_them(tmp_path: Path) -> None:
    """A session started without the README's PATH line: its panes find the simulator's own agents, not the lane's."""
    done, _, summary = _lane(tmp_path, ["tests/e2e/test_read_only.py"], agents_on_path=False)

    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert re.fullmatch(r"1 skipped in [\d.]+s.*", summary), done.stdout[-3000:]
    assert "the live herdr's panes do not find the scripted agents (`command -v` in a pane: " in done.stdout
    assert "start the lane's session as the README says (`python3 -m herdr_sim.agent.bin DIR`" in done.stdout
