"""docs/simulator.md's hand-start steps, run verbatim by bash with only `herdr-sim` on PATH, start a scripted agent."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

DOC = Path(__file__).resolve().parents[2] / "docs" / "simulator.md"

pytestmark = pytest.mark.e2e


def hand_start_steps() -> str:
    """The first ```sh block under "## Start an isolated simulated herdr", exactly as written."""
    text = DOC.read_text()
    section = text[text.index("## Start an isolated simulated herdr") :]
    match = re.search(r"```sh\n(.*?)```", section, re.S)
    assert match is not None, "docs/simulator.md lost its hand-start block"
    return match.group(1)


def test_the_documented_steps_start_a_scripted_codex(tmp_path: Path) -> None:
    beside = Path(sys.executable).parent / "herdr-sim"  # the venv running pytest, on PATH or not
    sim = str(beside) if beside.exists() else shutil.which("herdr-sim")
    assert sim is not None, "herdr-sim is not installed (pip install -e '.[test]')"
    # A new contributor's shell: herdr-sim on PATH, the simulator's <home>/bin not (tmux must not hide that).
    env = {k: v for k, v in os.environ.items() if not k.startswith("HERDR_")}
    env.update(PATH=f"{os.path.dirname(sim)}:/usr/bin:/bin", TMPDIR=str(tmp_path))
    work = tmp_path / "project"
    work.mkdir()
    try:
        done = subprocess.run(["bash", "-euo", "pipefail", "-c", hand_start_steps()], cwd=work, env=env, capture_output=True, text=True, timeout=120)
    finally:
        for marker in tmp_path.glob("*/herdr-sim.marker"):
            subprocess.run([sim, "server", "stop"], env={**env, "HERDR_SIM_HOME": str(marker.parent)}, capture_output=True, timeout=60)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    ready, created, started = lines[0], json.loads(lines[1]), json.loads(lines[2])
    assert ready.startswith("herdr-sim server ready: ")
    assert (created["result"]["type"], created["result"]["root_pane"]["pane_id"]) == ("workspace_created", "w1:p1")
    agent = started["result"]["agent"]
    assert (started["result"]["type"], agent["name"], agent["agent"], agent["interactive_ready"], started["result"]["argv"]) == ("agent_started", "demo", "codex", True, ["codex"])
    assert "codex (herdr-sim scripted agent) - paste a delegation packet; /exit to quit" in lines[3:]
