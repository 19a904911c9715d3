"""Round-2 fidelity against CONTRACT.md: cross-workspace pane move, sessions, integrations, schema, faults, help."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from herdr_sim.testing import SimServer

HERE = Path(__file__).resolve().parent


def herdr(argv: list[str], **env: str) -> subprocess.CompletedProcess[str]:
    full = {k: v for k, v in os.environ.items() if not k.startswith("HERDR_") or k == "HERDR_SIM_VERSION"}
    full.update(env)
    return subprocess.run([sys.executable, "-m", "herdr_sim.cli", *argv], capture_output=True, text=True, timeout=30,
                          env=full)


def ok(done: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)["result"]


def err(done: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    assert (done.returncode, done.stdout) == (1, ""), done
    return json.loads(done.stderr)


def git_repo(path: Path) -> Path:
    path.mkdir()
    for argv in (["init", "-q", "-b", "main"], ["commit", "-q", "--allow-empty", "-m", "init"]):
        subprocess.run(["git", "-C", str(path), *argv], check=True, timeout=30)
    return path


# ---- §7 pane move ------------------------------------------------------------------------------------------

MOVE_USAGE = ("usage: herdr pane move <pane_id> --tab <tab_id> --split right|down [--target-pane ID] [--ratio FLOAT] "
              "[--focus|--no-focus]\n"
              "       herdr pane move <pane_id> --new-tab [--workspace ID] [--label TEXT] [--focus|--no-focus]\n"
              "       herdr pane move <pane_id> --new-workspace [--label TEXT] [--tab-label TEXT] [--focus|--no-focus]\n")
MOVE_ARGV = [  # §7 move: the flag combination is checked on the client (src/cli/pane.rs:649-796), exit 2
    (["w1:p1"], MOVE_USAGE),
    (["--new-tab"], MOVE_USAGE),
    (["w1:p1", "--new-tab", "--new-workspace"], MOVE_USAGE),
    (["w1:p1", "--tab", "w1:t1"], MOVE_USAGE),
    (["w1:p1", "--tab", "w1:t1", "--split", "right", "--label", "x"], MOVE_USAGE),
    (["w1:p1", "--new-tab", "--split", "down"], MOVE_USAGE),
    (["w1:p1", "--new-workspace", "--workspace", "w1"], MOVE_USAGE),
    (["w1:p1", "--tab", "w1:t1", "--split", "left"], "invalid split direction: left\n"),
    (["w1:p1", "--new-tab", "--ratio", "x"], "invalid ratio: x\n"),
    (["w1:p1", "--new-tab", "--bogus"], "unknown option: --bogus\n"),
    (["w1:p1", "--new-tab", "--label"], "missing value for --label\n"),
]


@pytest.mark.parametrize(("argv", "stderr"), MOVE_ARGV, ids=[" ".join(a) for a, _ in MOVE_ARGV])
def test_pane_move_argv_errors(argv: list[str], stderr: str) -> None:
    done = herdr(["pane", "move", *argv])
    assert (done.returncode, done.stdout, done.stderr) == (2, "", stderr)


def test_cross_workspace_move_renames_the_pane_keeps_an_alias_and_the_agent(sim: SimServer, tmp_path: Path,
                                                                           check_success: Any) -> None:
    """§7 move, §1 aliases, §10 HERDR_PANE_ID: the moved agent keeps name, state and seq; hooks reach it by alias."""
    ok(sim.run(["workspace", "create", "--cwd", str(tmp_path)]))
    ok(sim.run(["workspace", "create", "--cwd", str(tmp_path)]))  # w2, unfocused
    ok(sim.run(["agent", "start", "worker", "--kind", "codex", "--pane", "w2:p1"]))
    ok(sim.run(["agent", "prompt", "worker", "one", "--wait", "--timeout", "20000"]))
    before = ok(sim.run(["agent", "get", "worker"]))["agent"]
    moved = check_success(sim.run(["pane", "move", "w2:p1", "--new-tab", "--workspace", "w1", "--label", "wt",
                                   "--no-focus"]).stdout)["result"]["move_result"]
    assert list(moved) == ["changed", "previous_pane_id", "previous_workspace_id", "previous_tab_id", "pane",
                           "target_layout", "created_tab", "closed_workspace_id", "closed_tab_id", "focused_pane_id"]
    assert {k: v for k, v in moved.items() if k not in ("pane", "target_layout")} == {
        "changed": True, "previous_pane_id": "w2:p1", "previous_workspace_id": "w2", "previous_tab_id": "w2:t1",
        "created_tab": {"tab_id": "w1:t2", "workspace_id": "w1", "number": 2, "label": "wt", "focused": False,
                        "pane_count": 1, "agent_status": "done"},  # finished in a background tab
        "closed_workspace_id": "w2", "closed_tab_id": "w2:t1", "focused_pane_id": "w1:p2"}
    assert (moved["pane"]["pane_id"], moved["pane"]["tab_id"], moved["pane"]["focused"]) == ("w1:p2", "w1:t2", False)
    after = ok(sim.run(["agent", "get", "worker"]))["agent"]
    assert {k: after[k] for k in ("name", "agent", "agent_status", "state_change_seq", "pane_id", "terminal_id")} == {
        "name": "worker", "agent": "codex", "agent_status": "done", "state_change_seq": before["state_change_seq"],
        "pane_id": "w1:p2", "terminal_id": before["terminal_id"]}
    assert err(sim.run(["agent", "get", "w2:p1"]))["error"]["code"] == "agent_not_found"  # agent targets are strict
    assert ok(sim.run(["pane", "get", "w2:p1"]))["pane"]["pane_id"] == "w1:p2"  # pane commands take the alias
    assert [w["workspace_id"] for w in ok(sim.run(["workspace", "list"]))["workspaces"]] == ["w1"]
    # The agent still reports through its old HERDR_PANE_ID (the alias): the prompt's turn is observed.
    done = ok(sim.run(["agent", "prompt", "w1:p2", "two", "--wait", "--until", "done", "--timeout", "20000"]))
    assert done["agent"]["state_change_seq"] > before["state_change_seq"]
    ok(sim.run(["pane", "wait-output", "w2:p1", "--match", "codex got: two", "--timeout", "5000"]))


def test_move_focus_defaults_on_and_tab_split_destination(sim: SimServer, tmp_path: Path, check_success: Any) -> None:
    """§7 move: focus defaults to true; --tab --split inserts next to the target pane; same tab is unchanged."""
    ok(sim.run(["workspace", "create", "--cwd", str(tmp_path)]))
    ok(sim.run(["pane", "split", "w1:p1", "--direction", "right"]))  # w1:p2
    moved = check_success(sim.run(["pane", "move", "w1:p2", "--new-tab"]).stdout)["result"]["move_result"]
    assert (moved["pane"]["pane_id"], moved["pane"]["focused"], moved["focused_pane_id"]) == ("w1:p2", True, "w1:p2")
    assert "closed_tab_id" not in moved and moved["source_layout"]["panes"][0]["pane_id"] == "w1:p1"
    same = check_success(sim.run(["pane", "move", "w1:p2", "--tab", "w1:t2", "--split", "down"]).stdout)
    assert (same["result"]["move_result"]["changed"], same["result"]["move_result"]["reason"]) == (False, "same_tab")
    back = ok(sim.run(["pane", "move", "w1:p2", "--tab", "w1:t1", "--split", "down", "--no-focus"]))["move_result"]
    assert (back["closed_tab_id"], back["focused_pane_id"]) == ("w1:t2", "w1:p1")
    assert back["target_layout"]["splits"][0]["direction"] == "down"
    new_ws = ok(sim.run(["pane", "move", "w1:p2", "--new-workspace", "--label", "solo", "--tab-label", "t"]))
    result = new_ws["move_result"]
    assert (result["pane"]["pane_id"], result["created_workspace"]["label"], result["created_tab"]["label"]) == (
        "w2:p1", "solo", "t")
    assert result["created_workspace"]["focused"] is True


def test_worktree_root_pane_moved_into_the_repo_workspace(sim: SimServer, tmp_path: Path) -> None:
    """§7 move + §9: the emptied worktree workspace closes; git still lists the checkout, no open workspace."""
    repo = git_repo(tmp_path / "project")
    created = ok(sim.run(["worktree", "create", "--cwd", str(repo), "--branch", "feat/a", "--no-focus"]))
    ws = created["workspace"]["workspace_id"]
    parent = created["worktree"]["open_workspace_id"] and "w1"
    moved = ok(sim.run(["pane", "move", created["root_pane"]["pane_id"], "--new-tab", "--workspace", parent,
                        "--label", "feat-a"]))["move_result"]
    assert (moved["closed_workspace_id"], moved["pane"]["pane_id"], moved["focused_pane_id"]) == (ws, "w1:p2", "w1:p2")
    listed = ok(sim.run(["worktree", "list", "--cwd", str(repo)]))["worktrees"]
    assert [(Path(w["path"]).name, "open_workspace_id" in w) for w in listed] == [("project", True), ("feat-a", False)]


# ---- §4 local commands -------------------------------------------------------------------------------------

def test_api_schema_needs_no_server() -> None:
    """§4 / src/cli/api.rs: the schema is embedded in the binary."""
    done = herdr(["api", "schema", "--json"])
    assert done.returncode == 0 and json.loads(done.stdout)["protocol"] == 17


INTEGRATIONS = [  # §4 integration status, herdr's registry order (src/integration/registry.rs)
    (None, {"pi": "current (v6)", "claude": "current (v7)", "codex": "current (v6)", "opencode": "current (v9)"}),
    ("", {}),
    ("codex,pi:outdated,claude:legacy", {"codex": "current (v6)", "pi": "outdated (v5 < v6)",
                                         "claude": "outdated (legacy < v7)"}),
]


@pytest.mark.parametrize(("config", "installed"), INTEGRATIONS, ids=["default", "none", "mixed"])
def test_integration_status_follows_configuration(tmp_path: Path, config: str | None, installed: dict[str, str]) -> None:
    env = {"HOME": str(tmp_path), "XDG_CONFIG_HOME": ""} | ({} if config is None else {"HERDR_SIM_INTEGRATIONS": config})
    done = herdr(["integration", "status"], **env)
    paths = {"pi": ".pi/agent/extensions/herdr-agent-state.ts", "omp": ".omp/agent/extensions/herdr-omp-agent-state.ts",
             "claude": ".claude/hooks/herdr-agent-state.sh", "codex": ".codex/herdr-agent-state.sh",
             "copilot": ".copilot/hooks/herdr-agent-state.sh", "devin": ".config/devin/herdr-agent-state.sh",
             "droid": ".factory/hooks/herdr-agent-state.sh", "kimi": ".kimi-code/hooks/herdr-agent-state.sh",
             "opencode": ".config/opencode/plugins/herdr-agent-state.js",
             "kilo": ".config/kilo/plugin/herdr-agent-state.js",
             "hermes": ".hermes/plugins/herdr-agent-state/__init__.py", "qodercli": ".qoder/hooks/herdr-agent-state.sh",
             "cursor": ".cursor/herdr-agent-state.sh", "mastracode": ".mastracode/hooks/herdr-agent-state.sh"}
    expected = "".join(f"{name}: {installed.get(name, 'not installed')} ({tmp_path / rel})\n"
                       for name, rel in paths.items())
    assert (done.returncode, done.stdout, done.stderr) == (0, expected, "")
    notice = herdr(["integration", "status", "--outdated-only"], **env)
    outdated = config == "codex,pi:outdated,claude:legacy"
    assert (notice.returncode, notice.stdout, notice.stderr) == (0, "", (
        "installed herdr integrations need updating; run herdr integration install pi and herdr integration install "
        "claude.\n") if outdated else "")


def test_named_session_status_list_and_mismatch(tmp_path: Path) -> None:
    """§1 sessions / §4: `<home>/sessions/<name>/herdr.sock`; another session sees no server."""
    with SimServer(tmp_path / "sim", {"HERDR_SIM_SETTLE_MS": "300"}, session="acme") as sim:
        home = sim.home
        sock = home / "sessions" / "acme" / "herdr.sock"
        status = json.loads(sim.run(["status", "--json"]).stdout)
        assert (status["client"]["session"], status["server"]["session"], status["server"]["socket"],
                status["server"]["running"]) == ("acme", "acme", str(sock), True)
        listed = json.loads(sim.run(["session", "list", "--json"]).stdout)
        assert listed == {"sessions": [
            {"name": "default", "default": True, "running": False, "socket_path": str(home / "herdr.sock"),
             "session_dir": str(home)},
            {"name": "acme", "default": False, "running": True, "socket_path": str(sock),
             "session_dir": str(home / "sessions" / "acme")}]}
        text = sim.run(["session", "list"]).stdout
        assert text == (f"{'name':<20} {'status':<8} {'directory':<48} socket\n"
                        f"{'default':<20} {'stopped':<8} {str(home):<48} {home / 'herdr.sock'}\n"
                        f"{'acme':<20} {'running':<8} {str(home / 'sessions' / 'acme'):<48} {sock}\n")
        assert ok(sim.run(["workspace", "create", "--cwd", str(tmp_path)]))["root_pane"]["pane_id"] == "w1:p1"
        assert sim.run(["pane", "run", "w1:p1", 'echo "sock=$HERDR_SOCKET_PATH session=$HERDR_SESSION"']).returncode == 0
        ok(sim.run(["pane", "wait-output", "w1:p1", "--match", f"sock={sock} session=acme", "--source", "recent-unwrapped", "--timeout", "5000"]))
        no_server = 'Error: Os { code: 2, kind: NotFound, message: "No such file or directory" }\n'
        for argv in (["--session", "other", "workspace", "list"], ["--session", "default", "workspace", "list"]):
            done = sim.run(argv)
            assert (done.returncode, done.stdout, done.stderr) == (1, "", no_server)
        ok(sim.run(["--session", "acme", "workspace", "list"]))


# ---- faults ------------------------------------------------------------------------------------------------

FAULTS = [("agent prompt", ["agent", "prompt", "nobody", "hi", "--wait"], "agent_prompt_stalled"),
          ("agent start", ["agent", "start", "x", "--kind", "codex", "--pane", "w9:p1"], "agent_start_failed"),
          ("agent wait", ["agent", "wait", "nobody"], "timeout"),
          ("pane wait-output", ["pane", "wait-output", "w9:p1", "--match", "x"], "timeout")]


def test_faults_fire_once_before_the_commands_work(sim: SimServer) -> None:
    """A fault answers the next matching call before any work (a missing target would otherwise answer)."""
    for command, _, code in FAULTS:
        sim.add_fault(command, code=code, message="injected")
    for _, argv, code in FAULTS:
        assert err(sim.run(argv))["error"] == {"code": code, "message": "injected"}
        assert err(sim.run(argv))["error"]["code"] != code  # consumed: the real answer now
    assert sim.run(["fault", "list"]).stdout == ""


# ---- §0 help -----------------------------------------------------------------------------------------------

HELP = [
    (["agent", "start", "--help"], "Usage: herdr agent start <name> --kind KIND --pane ID [--timeout MS] "
                                   "[-- <agent-args...>]\n"),
    (["session", "list", "-h"], "Usage: herdr session list [--json]\n"),
    (["status", "--help"], "Usage: herdr status [server|client] [--json]\n"),
]


@pytest.mark.parametrize(("argv", "stdout"), HELP, ids=[" ".join(a) for a, _ in HELP])
def test_help_after_a_command_path_is_long_help_on_stdout(argv: list[str], stdout: str) -> None:
    done = herdr(argv)
    assert (done.returncode, done.stdout, done.stderr) == (0, stdout, "")


def test_group_help_flag_is_stdout_exit_0_but_help_word_is_stderr() -> None:
    flag, word = herdr(["worktree", "--help"]), herdr(["worktree", "help"])
    assert (flag.returncode, flag.stderr, word.returncode, word.stdout) == (0, "", 0, "")
    assert flag.stdout == word.stderr and flag.stdout.startswith("herdr worktree commands:\n")
