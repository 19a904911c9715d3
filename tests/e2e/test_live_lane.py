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
LANE = ["tests/e2e/test_live_herdr.py", "tests/e2e/test_world.py", "tests/e2e/test_preflight.py::test_outside_herdr_stops_before_touching_anything"]
SIMULATOR_ONLY = "tests/e2e/test_read_only.py"  # scripted agents: skipped in the lane, with the reason


def test_orch_herdr_runs_the_marked_scenarios_against_that_herdr_and_skips_the_rest(tmp_path: Path) -> None:
    """As a person would run it (a shell in a pane of session `acme`, ORCH_HERDR=$(command -v herdr)), with the
    simulator standing in for the real herdr: no SimServer of the tests' own, the worlds are built on that server."""
    home = Path("/tmp") / f"orch-e2e-{os.getpid()}-lane"
    try:
        with SimServer(home, {"HERDR_SIM_SETTLE_MS": "300"}, session="acme") as sim:
            pane = json.loads(sim.run(["workspace", "create", "--cwd", str(tmp_path), "--no-focus"]).stdout)["result"]["root_pane"]
            env = {**sim.env(), "HERDR_ENV": "1", "HERDR_PANE_ID": pane["pane_id"], "ORCH_HERDR": str(sim.paths.bin / "herdr")}
            done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", *LANE, SIMULATOR_ONLY],
                                  cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
            # Every workspace the lane made is closed again: only the shell's own is left.
            left = [w["workspace_id"] for w in json.loads(sim.run(["workspace", "list"]).stdout)["result"]["workspaces"]]
    finally:
        shutil.rmtree(home, ignore_errors=True)
    summary = done.stdout.strip().splitlines()[-1]
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert re.fullmatch(r"7 passed, 1 skipped in [\d.]+s.*", summary), done.stdout[-3000:] + done.stderr[-2000:]
    assert "needs the simulator (scripted agents, faults or its knobs): the live lane (ORCH_HERDR) runs only the tests marked live_herdr" in done.stdout
    assert left == [pane["workspace_id"]]
