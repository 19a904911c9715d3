"""`python3 -m herdr_sim.agent.bin DIR`: the scripted agents in a dir of their own, for a real herdr session's PATH."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from herdr_sim.agent.bin import main


def test_it_writes_one_executable_per_kind_no_herdr_and_prints_the_session_line(tmp_path: Path) -> None:
    target = tmp_path / "my agents"

    done = subprocess.run([sys.executable, "-m", "herdr_sim.agent.bin", str(target)], capture_output=True, text=True, timeout=60)

    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout == (
        f"Scripted agents (codex, claude, opencode, pi) written to {target}. Start the lane's herdr session with them first on its PATH:\n"
        f"PATH='{target}':$PATH herdr --session acme\n"
    )
    assert sorted(p.name for p in target.iterdir()) == ["claude", "codex", "herdr-sim-agents.marker", "opencode", "pi", "scenarios.toml"]
    assert all(os.access(target / kind, os.X_OK) for kind in ("claude", "codex", "opencode", "pi"))
    assert (target / "scenarios.toml").read_text() == ""
    # The scenario file is baked in: a real herdr's panes carry no HERDR_SIM_SCENARIOS of ours.
    assert f"os.environ.setdefault('HERDR_SIM_SCENARIOS', {str(target / 'scenarios.toml')!r})" in (target / "codex").read_text()


def test_a_second_run_keeps_the_scenarios_written_since(tmp_path: Path) -> None:
    main([str(tmp_path)])
    (tmp_path / "scenarios.toml").write_text('[[task.x]]\ndo = "result"\n')

    assert main([str(tmp_path)]) == 0
    assert (tmp_path / "scenarios.toml").read_text() == '[[task.x]]\ndo = "result"\n'


def test_without_a_dir_it_prints_its_usage_and_writes_nothing(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "herdr_sim.agent.bin"], cwd=tmp_path, capture_output=True, text=True, timeout=60)

    assert (done.returncode, done.stdout, done.stderr) == (2, "", "usage: python3 -m herdr_sim.agent.bin DIR\n")
    assert list(tmp_path.iterdir()) == []
