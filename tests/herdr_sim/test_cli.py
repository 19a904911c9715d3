"""CLI fidelity against CONTRACT.md: argv grammar, streams, exit codes, envelopes, ids, focus, agent rules."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from herdr_sim.testing import SimServer


def herdr(argv: list[str], env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "herdr_sim.cli", *argv], capture_output=True, text=True,
                          timeout=30, env=env)


# §0 and §14.6/§14.12/§14.15: usage errors (exit 2, stderr text) need no server.
USAGE = [
    (["workspace", "list", "--json"], "usage: herdr workspace list\n"),  # §0 --json rejection
    (["agent", "list", "--json"], "usage: herdr agent list\n"),
    (["pane", "list", "--json"], "unknown option: --json\n"),
    (["tab", "list", "--json"], "unknown option: --json\n"),
    (["agent", "prompt", "w1:p1", "hi", "--timeout", "10"], "--timeout requires --wait\n"),  # §8, agent.rs:691-698
    (["agent", "prompt", "w1:p1", "hi", "--until", "idle"], "--until requires --wait\n"),
    (["agent", "prompt", "w1:p1", "two", "words"], "unknown option: words\n"),  # §8: exactly one word
    (["agent", "start", "x", "--kind", "vim", "--pane", "w1:p1"], "unsupported interactive agent kind: vim\n"),
    (["agent", "start", "x", "--pane", "w1:p1"], "missing required --kind\n"),
    (["pane", "split", "w1:p1"], "usage: herdr pane split [<pane_id>|--pane ID|--current] --direction right|down [--ratio FLOAT] "
     "[--cwd PATH] [--env KEY=VALUE] [--focus] [--no-focus]\n"),  # §7, pane.rs:607-611
    (["worktree", "open", "--cwd", "/tmp"], "usage: herdr worktree open [--workspace ID | --cwd PATH] (--path PATH | --branch NAME) "
     "[--label TEXT] [--focus] [--no-focus] [--json]\n"),  # worktree.rs:230-235
    (["wait"], "unknown command: wait\nrun 'herdr --help' for usage\n"),  # §0
]


@pytest.mark.parametrize(("argv", "stderr"), USAGE, ids=[" ".join(a) for a, _ in USAGE])
def test_usage_errors_exit_2_with_text_on_stderr(argv: list[str], stderr: str) -> None:
    done = herdr(argv)
    assert (done.returncode, done.stdout, done.stderr) == (2, "", stderr)


def test_agent_stop_does_not_exist_and_prints_agent_help() -> None:
    """§8 / §14.12."""
    done = herdr(["agent", "stop", "x"])
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.startswith("herdr agent commands:\n  herdr agent list\n")
    assert "stop" not in done.stderr


def test_report_agent_done_state_is_a_rust_custom_error() -> None:
    """§0 / §7: `--state done` is rejected by the parser with exit 1, not 2."""
    done = herdr(["pane", "report-agent", "w1:p1", "--source", "custom:x", "--agent", "pi", "--state", "done"])
    assert (done.returncode, done.stdout) == (1, "")
    assert done.stderr == ('Error: Custom { kind: Other, error: "invalid pane agent state: done '
                           '(expected idle, working, blocked, or unknown)" }\n')


def test_no_server_is_a_non_json_os_error_but_local_commands_work(tmp_path: Path) -> None:
    """§0 / §14.15."""
    done = herdr(["workspace", "list"])
    assert (done.returncode, done.stdout) == (1, "")
    assert done.stderr == 'Error: Os { code: 2, kind: NotFound, message: "No such file or directory" }\n'
    assert herdr(["--version"]).stdout == "herdr 0.7.5\n"
    assert herdr(["--help"]).stdout.startswith("herdr — terminal workspace manager for AI coding agents\n")
    status = json.loads(herdr(["status", "--json"]).stdout)
    assert status["server"]["running"] is False and status["server"]["version"] is None
    sessions = json.loads(herdr(["session", "list", "--json"]).stdout)
    assert [s["name"] for s in sessions["sessions"]] == ["default"]
    assert herdr(["integration", "status"]).returncode == 0


def test_workspace_tab_pane_shapes_ids_and_focus(sim: SimServer, check_success: Any, tmp_path: Path) -> None:
    """§5, §6, §7, §14.2-5: envelopes, id counters across tabs, focus defaults, schema-valid output."""
    first = check_success(sim.run(["workspace", "create", "--cwd", str(tmp_path), "--label", "api"]).stdout)
    assert first["id"] == "cli:workspace:create" and first["result"]["type"] == "workspace_created"
    assert first["result"]["workspace"]["focused"] is True  # the first workspace becomes active
    assert list(first["result"]["root_pane"]) == ["pane_id", "terminal_id", "workspace_id", "tab_id", "focused",
                                                  "cwd", "foreground_cwd", "agent_status", "scroll", "revision"]
    second = check_success(sim.run(["workspace", "create", "--cwd", str(tmp_path)]).stdout)["result"]
    assert (second["workspace"]["workspace_id"], second["workspace"]["focused"]) == ("w2", False)
    split = check_success(sim.run(["pane", "split", "w1:p1", "--direction", "down"]).stdout)["result"]
    assert (split["type"], split["pane"]["pane_id"], split["pane"]["focused"]) == ("pane_info", "w1:p2", False)
    tab = check_success(sim.run(["tab", "create", "--workspace", "w1"]).stdout)["result"]
    assert (tab["tab"]["tab_id"], tab["root_pane"]["pane_id"], tab["tab"]["focused"]) == ("w1:t2", "w1:p3", False)
    for argv in (["workspace", "list"], ["tab", "list"], ["pane", "list"], ["agent", "list"], ["pane", "get", "w1:p2"],
                 ["pane", "layout", "--pane", "w1:p1"], ["workspace", "get", "w1"], ["pane", "current", "--current"]):
        check_success(sim.run(argv).stdout)
    current = json.loads(sim.run(["pane", "current"], HERDR_PANE_ID="w1:p2").stdout)
    assert current["result"]["pane"]["pane_id"] == "w1:p2"  # §14.16
    missing = sim.run(["pane", "get", "w9:p1"])
    assert (missing.returncode, missing.stdout) == (1, "")
    assert json.loads(missing.stderr) == {"id": "cli:pane:get", "error": {"code": "pane_not_found",
                                                                         "message": "pane w9:p1 not found"}}
    quiet = sim.run(["pane", "send-text", "w1:p1", "echo", "hi"])
    assert (quiet.returncode, quiet.stdout, quiet.stderr) == (0, "", "")  # §14.1
    # §7 close: the last pane closes the workspace; pane numbers are never reused.
    assert sim.run(["pane", "close", "w2:p1"]).stdout == '{"id":"cli:pane:close","result":{"type":"ok"}}\n'
    third = json.loads(sim.run(["workspace", "create", "--cwd", str(tmp_path)]).stdout)["result"]
    assert third["workspace"]["workspace_id"] == "w3"


def test_hook_only_agent_states_done_idle_seq_and_prompt_refusal(sim: SimServer, tmp_path: Path) -> None:
    """§3, §7 report-agent, §8.2: hook-only agents are addressable but not promptable."""
    sim.run(["workspace", "create", "--cwd", str(tmp_path)])
    sim.run(["tab", "create", "--workspace", "w1"])  # w1:p2 in a background tab

    def report(pane: str, state: str, *extra: str, source: str = "custom:t") -> None:
        done = sim.run(["pane", "report-agent", pane, "--source", source, "--agent", "pi", "--state", state, *extra])
        assert (done.returncode, done.stdout, done.stderr) == (0, "", "")

    def agent(target: str) -> dict[str, Any]:
        return json.loads(sim.run(["agent", "get", target]).stdout)["result"]["agent"]

    report("w1:p1", "working")
    report("w1:p1", "idle")
    report("w1:p2", "working")
    report("w1:p2", "idle")
    assert agent("w1:p1")["agent_status"] == "idle"  # completion in the active tab
    assert agent("w1:p2")["agent_status"] == "done"  # completion in a background tab
    assert agent("w1:p2")["state_change_seq"] == 4
    report("w1:p2", "working", "--seq", "5")
    report("w1:p2", "idle", "--seq", "5")  # stale: dropped
    report("w1:p2", "idle")  # no seq after a seq: dropped
    assert agent("w1:p2")["agent_status"] == "working"
    report("w1:p1", "working", source="herdr:claude")  # reserved source for another label: applies
    sim.run(["pane", "report-agent", "w1:p1", "--source", "herdr:codex", "--agent", "codex", "--state", "blocked"])
    assert agent("w1:p1")["agent_status"] == "working"  # reserved (herdr:codex, codex) ignored for state
    refused = sim.run(["agent", "prompt", "w1:p1", "hello"])
    assert json.loads(refused.stderr) == {"id": "cli:agent:prompt", "error": {
        "code": "agent_not_ready", "message": "agent w1:p1 is no longer the pane foreground process"}}
    assert json.loads(sim.run(["agent", "get", "pi"]).stderr)["error"]["code"] == "agent_not_found"
    focus = json.loads(sim.run(["agent", "focus", "w1:p2"]).stdout)["result"]["agent"]
    assert focus["focused"] is True


def test_faults_are_consumed_in_order(sim: SimServer, tmp_path: Path) -> None:
    """Simulator-only fault injection (docs/simulator.md)."""
    sim.add_fault("workspace create", code="workspace_create_failed", message="boom")
    sim.add_fault("workspace create", drop_root_pane=True)
    failed = sim.run(["workspace", "create", "--cwd", str(tmp_path)])
    assert (failed.returncode, failed.stderr) == (1, '{"id":"cli:workspace:create","error":{"code":'
                                                     '"workspace_create_failed","message":"boom"}}\n')
    dropped = json.loads(sim.run(["workspace", "create", "--cwd", str(tmp_path)]).stdout)["result"]
    assert "root_pane" not in dropped and dropped["workspace"]["workspace_id"] == "w1"
    assert "root_pane" in json.loads(sim.run(["workspace", "create", "--cwd", str(tmp_path)]).stdout)["result"]


def test_a_hang_fault_is_a_wedged_server_the_call_never_answers_and_acts_on_nothing(sim: SimServer, tmp_path: Path) -> None:
    """A hung herdr: the client connects and waits; only the caller's time limit ends it (docs/simulator.md)."""
    sim.add_fault("workspace create", hang=True)
    with pytest.raises(subprocess.TimeoutExpired):
        sim.run(["workspace", "create", "--cwd", str(tmp_path)], timeout=2)
    assert json.loads(sim.run(["workspace", "list"]).stdout)["result"]["workspaces"] == []  # herdr acted on nothing
    made = json.loads(sim.run(["workspace", "create", "--cwd", str(tmp_path)]).stdout)["result"]  # used up: answered
    assert made["workspace"]["workspace_id"] == "w1"


def test_api_schema_lists_implemented_methods(sim: SimServer) -> None:
    doc = json.loads(sim.run(["api", "schema", "--json"]).stdout)
    assert doc["protocol"] == 17 and list(doc) == ["$schema", "protocol", "schema_version", "title", "schemas"]
    methods = {m["properties"]["method"]["const"] for m in doc["schemas"]["request"]["oneOf"]}
    assert {"agent.prompt", "worktree.create", "agent.start"} <= methods and "agent.stop" not in methods
