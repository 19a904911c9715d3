"""Real agent launchers: a fresh private HOME per launch with the kind's offline configuration, the real exe exec'd."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from herdr_sim.model import agents
from herdr_sim.model.agents import API_KEY, executable, install, write_launchers


@pytest.fixture
def fake_exe(tmp_path: Path) -> Path:
    """Stands in for an installed agent: prints its argv, HOME, and the variables a launcher must set or drop."""
    exe = tmp_path / "fake-agent"
    exe.write_text('#!/bin/sh\necho "argv=$*"\necho "HOME=$HOME"\necho "XDG_CONFIG_HOME=$XDG_CONFIG_HOME"\n'
                   'echo "TMUX=${TMUX-unset}"\necho "PI_OFFLINE=${PI_OFFLINE-unset}"\necho "ANTHROPIC_BASE_URL=${ANTHROPIC_BASE_URL-unset}"\n')
    exe.chmod(0o755)
    return exe


def launch(directory: Path, kind: str, *args: str) -> dict[str, str]:
    done = subprocess.run([str(directory / kind), *args], capture_output=True, text=True, timeout=30,
                          env={**os.environ, "TMUX": "/tmp/tmux-0/default,1,0"})
    assert done.returncode == 0, done.stderr
    return dict(line.split("=", 1) for line in done.stdout.splitlines())


def test_each_launch_gets_its_own_home_with_the_kinds_offline_config(tmp_path: Path, fake_exe: Path) -> None:
    launchers = write_launchers(tmp_path / "agents", {k: fake_exe for k in agents.KINDS}, "http://127.0.0.1:4567")

    first, second = launch(launchers, "pi", "--x"), launch(launchers, "pi")
    assert first["argv"] == "--x" and first["HOME"] != second["HOME"]
    assert Path(first["HOME"]).parent == launchers / "homes"
    assert (first["XDG_CONFIG_HOME"], first["TMUX"], first["PI_OFFLINE"]) == (f"{first['HOME']}/.config", "unset", "1")
    models = json.loads((Path(first["HOME"]) / ".pi" / "agent" / "models.json").read_text())
    assert models["providers"]["orchsim"]["baseUrl"] == "http://127.0.0.1:4567/v1"

    claude = launch(launchers, "claude")
    assert claude["ANTHROPIC_BASE_URL"] == "http://127.0.0.1:4567"
    state = json.loads((Path(claude["HOME"]) / ".claude.json").read_text())
    assert (state["projects"], state["customApiKeyResponses"]["approved"]) == ({}, [API_KEY[-20:]])  # nothing pre-trusted
    settings = json.loads((Path(claude["HOME"]) / ".claude" / "settings.json").read_text())
    assert settings["permissions"] == {"defaultMode": "default", "allow": ["Bash"]}

    codex = launch(launchers, "codex")
    assert codex["argv"] == "--no-daemon"
    config = tomllib.loads((Path(codex["HOME"]) / ".codex" / "config.toml").read_text())
    assert (config["model_providers"]["orchsim"]["wire_api"], config["approval_policy"], "projects" in config) == ("responses", "never", False)

    opencode = launch(launchers, "opencode")
    config = json.loads((Path(opencode["HOME"]) / ".config" / "opencode" / "opencode.json").read_text())
    assert (config["provider"]["orchsim"]["options"]["baseURL"], config["permission"]["bash"]) == ("http://127.0.0.1:4567/v1", "allow")


def test_ask_leaves_the_shell_tool_to_the_agents_own_permission_form(tmp_path: Path, fake_exe: Path) -> None:
    launchers = write_launchers(tmp_path / "agents", {k: fake_exe for k in ("claude", "codex", "opencode")}, "http://h", ask=True)
    claude = json.loads((launchers / "templates" / "claude-home" / ".claude" / "settings.json").read_text())
    codex = tomllib.loads((launchers / "templates" / "codex-home" / ".codex" / "config.toml").read_text())
    opencode = json.loads((launchers / "templates" / "opencode-home" / ".config" / "opencode" / "opencode.json").read_text())
    assert (claude["permissions"], codex["approval_policy"], opencode["permission"]["bash"]) == ({"defaultMode": "default"}, "on-request", "ask")
    assert codex["sandbox_mode"] == "workspace-write"


def test_install_without_npm_skips_each_kind_with_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # no node, no npm
    found, problems = install(tmp_path / "cache", ("pi", "codex"))
    assert (found, problems) == ({}, [
        "pi: skipped, npm is not on PATH (node 20 and npm install the real agents)",
        "codex: skipped, npm is not on PATH (node 20 and npm install the real agents)",
    ])
    assert executable(tmp_path / "cache", "pi") is None


def test_the_cache_defaults_outside_home_sensitive_places() -> None:
    assert agents.cache_dir({"ORCH_REAL_AGENTS_CACHE": "/c"}) == Path("/c")
    assert agents.cache_dir({"XDG_CACHE_HOME": "/x", "HOME": "/h"}) == Path("/x/orch-real-agents")
    assert agents.cache_dir({"HOME": "/h"}) == Path("/h/.cache/orch-real-agents")


def test_the_simulators_agent_execs_the_kinds_launcher_or_says_in_one_line_there_is_none(tmp_path: Path, fake_exe: Path) -> None:
    launchers = write_launchers(tmp_path / "agents", {"pi": fake_exe}, "http://h")
    env = {**os.environ, agents.REAL_AGENTS_ENV: str(launchers)}
    for kind in ("pi", "codex"):  # what the simulator's bin writes for each kind (herdr_sim.server.write_bin)
        (tmp_path / kind).write_text(f"from herdr_sim.model.launch import main\nmain({kind!r})\n")

    ran = subprocess.run([sys.executable, str(tmp_path / "pi"), "--x"], capture_output=True, text=True, timeout=30, env=env)
    missing = subprocess.run([sys.executable, str(tmp_path / "codex")], capture_output=True, text=True, timeout=30, env=env)

    assert (ran.returncode, ran.stdout.splitlines()[0]) == (0, "argv=--x")  # the launcher replaced the process
    assert (missing.returncode, missing.stdout, missing.stderr) == (
        127, "", f"codex: no real codex agent installed for this lane ({agents.REAL_AGENTS_ENV}={launchers})\n")
