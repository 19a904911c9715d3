"""The simulated network's `ssh`: a command reaches its target's shell as sshd hands it over (one string, the target's
environment and folder only), and an unknown or down target is ssh's own failure, exit 255."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
from pathlib import Path

import pytest

from herdr_sim.machines import NETWORK_ENV
from herdr_sim.ssh import install

pytestmark = pytest.mark.any_version


def _ssh(tmp_path: Path, *argv: str, down: bool = False) -> subprocess.CompletedProcess[str]:
    box = tmp_path / "box"
    box.mkdir(exist_ok=True)
    network = tmp_path / "network.json"
    env = {"PATH": "/usr/bin:/bin", "HOME": str(box), "ON_THE_BOX": "yes"}
    network.write_text(json.dumps({"targets": {"me@box": {"home": str(tmp_path / "sim"), "env": env, "cwd": str(box), "down": down}}}))
    ssh = install(tmp_path / "bin")
    caller = {**os.environ, NETWORK_ENV: str(network), "FROM_THE_CALLER": "leaked"}
    return subprocess.run([str(ssh), *argv], env=caller, capture_output=True, text=True, timeout=60)


def test_a_command_runs_in_the_targets_shell_with_its_environment_only(tmp_path: Path) -> None:
    words = ["printf", "%s|", "it's $(x); rm -rf /", "--session", "$HOME", "a\nb"]
    shown = 'echo "$HOME $ON_THE_BOX ${FROM_THE_CALLER:-none} $(pwd)"'

    quoted = _ssh(tmp_path, "-T", "-o", "BatchMode=yes", "me@box", "--", shlex.join(words))
    env = _ssh(tmp_path, "me@box", "--", shown)

    # shlex.join survives the remote shell word for word (as orchestrator/remote.py relies on).
    assert (quoted.returncode, quoted.stdout, quoted.stderr) == (0, "it's $(x); rm -rf /|--session|$HOME|a\nb|", "")
    assert (env.returncode, env.stdout) == (0, f"{tmp_path}/box yes none {tmp_path}/box\n")


def test_an_unknown_or_down_target_is_ssh_failing_with_255(tmp_path: Path) -> None:
    unknown = _ssh(tmp_path, "me@elsewhere", "--", "true")
    down = _ssh(tmp_path, "me@box", "--", "true", down=True)
    interactive = _ssh(tmp_path, "me@box")

    assert (unknown.returncode, unknown.stderr) == (255, "ssh: Could not resolve hostname me@elsewhere: Name or service not known\n")
    assert (down.returncode, down.stderr) == (255, "ssh: connect to host me@box port 22: Connection refused\n")
    assert (interactive.returncode, interactive.stderr) == (255, "ssh (herdr-sim): no interactive sessions on the simulated network\n")
