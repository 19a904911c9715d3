"""One test per DELTA row (../shared/herdr-0.8.2/DELTA.md, ../shared/herdr-0.9.1/DELTA.md): the simulator under each
HERDR_SIM_VERSION profile, and orch's handling of it through its herdr boundary."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from herdr_sim import cli as sim_cli, procs
from herdr_sim.testing import SimServer, eventually
from orchestrator import errors as e
from orchestrator.agents import plan_mode_problem
from orchestrator.herdr import HerdrCli, RetryPolicy, version_support
from orchestrator.preflight import integration_problems

pytestmark = [pytest.mark.e2e, pytest.mark.any_version]

PROFILES = ("0.7.5", "0.8.2", "0.9", "0.9.5")
NINE = ("0.9", "0.9.5")  # the 0.9.1 profile and the 0.9.2-0.9.5 one
DIALOG = "Do you trust the contents of this directory?"


def herdr_sim() -> str:
    beside = Path(sys.executable).parent / "herdr-sim"  # the venv running pytest, on PATH or not
    found = str(beside) if beside.exists() else shutil.which("herdr-sim")
    assert found is not None, "herdr-sim is not installed (pip install -e '.[test]')"
    return found


def offline(tmp_path: Path, version: str, **env: str) -> HerdrCli:
    """orch's boundary on a simulator home with no server."""
    return HerdrCli(herdr_sim(), env={"HERDR_SIM_HOME": str(tmp_path / "sim"), "HERDR_SIM_VERSION": version, **env},
                    retry=RetryPolicy(read_wait_s=0), sleep=lambda _s: None)


@pytest.fixture(params=PROFILES)
def version(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("HERDR_SIM_VERSION", request.param)
    for outer in ("TERM_PROGRAM", "TERM_PROGRAM_VERSION"):  # the terminal these tests run in
        monkeypatch.delenv(outer, raising=False)
    return str(request.param)


@pytest.fixture
def sim(tmp_path: Path, version: str) -> Iterator[SimServer]:
    with SimServer(tmp_path / "sim", {"HERDR_SIM_SETTLE_MS": "300", "HERDR_SIM_VERSION": version}) as server:
        yield server


def boundary(sim: SimServer) -> HerdrCli:
    return HerdrCli(str(sim.paths.bin / "herdr"), env=sim.env())


def ok(done: subprocess.CompletedProcess[str]) -> Any:
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)["result"] if done.stdout.strip() else None


def workspace(sim: SimServer, cwd: Path) -> str:
    return str(ok(sim.run(["workspace", "create", "--cwd", str(cwd), "--no-focus"]))["root_pane"]["pane_id"])


def run_in(sim: SimServer, pane: str, command: str) -> None:
    ok(sim.run(["pane", "run", pane, command]))


def screen(sim: SimServer, pane: str, source: str = "recent") -> str:
    return sim.run(["pane", "read", pane, "--source", source]).stdout


# --- 0.8.2 DELTA ----------------------------------------------------------------------------------------------------


def test_082_row1_version_and_protocol(tmp_path: Path, version: str) -> None:
    herdr = offline(tmp_path, version)
    expected = {"0.7.5": ("herdr 0.7.5", 17), "0.8.2": ("herdr 0.8.2", 20), "0.9": ("herdr 0.9.1", 22), "0.9.5": ("herdr 0.9.5", 22)}[version]
    status = herdr.status()
    assert (herdr.version().text, status.client.protocol, version_support(status.client.version)) == (*expected, "tested")


def test_082_row2_no_server_is_herdr_unavailable_on_every_release(tmp_path: Path, version: str) -> None:
    herdr = offline(tmp_path, version)
    with pytest.raises(e.HerdrUnavailable) as raised:
        herdr.agent_list()
    sock = tmp_path / "sim" / "herdr.sock"
    expected = "herdr-sim agent list: herdr server is not running" if version == "0.7.5" else (
        f"herdr-sim agent list: herdr server is not running (server_not_running: no herdr server is running at {sock}; run `herdr` to start or attach it)"
    )
    assert (raised.value.message, raised.value.exit_code, raised.value.hint) == (expected, 3, "start herdr (or check --session / HERDR_SESSION / HERDR_SOCKET_PATH)")
    assert len(herdr.calls) == 3  # a read: retried like 0.7.5's Os error


def test_082_row3_needs_repair_is_judged_only_for_the_kinds_the_plan_uses(tmp_path: Path, version: str) -> None:
    herdr = offline(tmp_path, version, HERDR_SIM_INTEGRATIONS="claude,codex,opencode:repair")
    if version == "0.7.5":
        with pytest.raises(e.HerdrUsageError):  # 0.7.5 has no such state: the simulator refuses the knob
            herdr.integration_status()
        return
    entries = herdr.integration_status()
    assert integration_problems(["claude", "codex"], entries) == []
    assert integration_problems(["opencode"], entries) == [("opencode", "needs repair (v10)")]


def test_082_row4_a_prompt_to_an_agent_at_a_dialog(sim: SimServer, version: str, tmp_path: Path) -> None:
    herdr = boundary(sim)
    pane = workspace(sim, tmp_path)
    with contextlib.suppress(e.HerdrAgentNotReady):  # 0.8.2+ (row 6); 0.7.5 calls it started
        herdr.agent_start("trusty", kind="codex", pane=pane, timeout_ms=20000, args=("--sim-start-dialog", DIALOG))
    eventually(lambda: herdr.agent_get("trusty").agent_status == "blocked", what="the agent at its dialog")
    if version == "0.7.5":
        herdr.agent_prompt("trusty", "hello")  # written into the dialog
        eventually(lambda: herdr.agent_get("trusty").agent_status == "idle", what="the dialog answered by the prompt's Enter")
        return
    with pytest.raises(e.HerdrAgentBlocked) as raised:
        herdr.agent_prompt("trusty", "hello")
    assert raised.value.message == "herdr agent prompt: not sent: the agent is at a dialog (agent_blocked: agent trusty is blocked and requires interactive input)"
    assert "hello" not in screen(sim, pane)


def test_082_row5_and_09_row1_when_enter_is_written(sim: SimServer, version: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    herdr = boundary(sim)
    pane = workspace(sim, tmp_path)
    herdr.agent_start("prompted", kind="codex", pane=pane, timeout_ms=20000)
    later: list[tuple[Any, ...]] = []
    deliver = procs.send_keys_later
    monkeypatch.setattr(procs, "send_keys_later", lambda *args: later.append(args))
    for key, value in sim.env().items():
        monkeypatch.setenv(key, value)
    assert sim_cli.main(["agent", "prompt", "prompted", "say hi"]) == 0
    if version == "0.8.2":
        # The answer came before the Enter: a helper writes it 300 ms later (src/app/api/agents.rs:13).
        assert [args[2:] for args in later] == [(["Enter"], 300)]
        deliver(*later[0])
    else:
        assert later == []
    eventually(lambda: "I only act on delegation packets" in screen(sim, pane), what="the prompt submitted")
    # orch learns the window from its boundary (possible merges wait it out before the next repeat request).
    assert herdr.features().prompt_enter_delay_s == (0.3 if version == "0.8.2" else 0.0)


def test_082_row6_blocked_at_start_up_keeps_the_name_and_becomes_ready_once_answered(sim: SimServer, version: str, tmp_path: Path) -> None:
    herdr = boundary(sim)
    pane = workspace(sim, tmp_path)
    if version == "0.7.5":
        started = herdr.agent_start("trusty", kind="codex", pane=pane, timeout_ms=20000, args=("--sim-start-dialog", DIALOG))
        assert (started.agent.agent_status, started.agent.interactive_ready) == ("blocked", True)  # "ready" at the dialog
        return
    with pytest.raises(e.HerdrAgentNotReady) as raised:
        herdr.agent_start("trusty", kind="codex", pane=pane, timeout_ms=20000, args=("--sim-start-dialog", DIALOG))
    assert raised.value.herdr_message == "agent trusty is blocked during startup and is not ready for prompts"
    agent = herdr.agent_get("trusty")
    assert (agent.pane_id, agent.agent_status, agent.launch_pending, agent.interactive_ready) == (pane, "blocked", True, False)
    assert DIALOG in screen(sim, pane)
    herdr.pane_send_keys(pane, "Enter")
    eventually(lambda: herdr.agent_get("trusty").interactive_ready, what="the agent ready after its dialog")


def test_082_row7_shift_tab_reaches_the_agent_from_082(sim: SimServer, version: str, tmp_path: Path) -> None:
    herdr = boundary(sim)
    pane = workspace(sim, tmp_path)
    run_in(sim, pane, "cat -vT")
    eventually(lambda: procs.foreground(sim_pane_pid(sim, pane)) != [sim_pane_pid(sim, pane)], what="cat in the foreground")
    herdr.pane_send_keys(pane, "shift+tab")
    herdr.pane_send_keys(pane, "Enter")
    seen = "^I" if version == "0.7.5" else "^[[Z"
    eventually(lambda: any(line.strip() == seen for line in screen(sim, pane).splitlines()), what=f"cat printing {seen}")
    features = herdr.features()
    assert features.shift_tab is (version != "0.7.5")
    expected = None if version != "0.7.5" else (
        "plan-first needs herdr 0.8.2 or later: herdr 0.7.5 sends shift+tab as a plain Tab, so claude's plan mode cannot be entered (use mode = \"direct\" or upgrade herdr)"
    )
    assert plan_mode_problem("claude", features) == expected


def sim_pane_pid(sim: SimServer, pane: str) -> int:
    from herdr_sim.state import Store

    return Store(sim.paths).load().panes[pane].shell_pid


def test_082_row8_reading_an_idle_alternate_screen_agent_costs_time(sim: SimServer, version: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pane = workspace(sim, tmp_path)
    run_in(sim, pane, "printf '\\033[?1049h'; exec sleep 300")
    ok(sim.run(["pane", "report-agent", pane, "--source", "test", "--agent", "codex", "--state", "idle"]))
    for key, value in {**sim.env(), "HERDR_SIM_ALT_READ_MS": "1200"}.items():
        monkeypatch.setenv(key, value)
    eventually(lambda: subprocess.run(["tmux", "-S", str(sim.paths.tmux_socket), "display", "-p", "-t", tmux_of(sim, pane), "#{alternate_on}"],
                                      capture_output=True, text=True, timeout=10).stdout.strip() == "1", what="the alternate screen")
    slept: list[float] = []
    monkeypatch.setattr(time, "sleep", slept.append)
    assert sim_cli.main(["pane", "read", pane, "--source", "recent"]) == 0
    # subprocess's own waits poll in steps of at most 50 ms; the read's cost is the one long sleep.
    assert [s for s in slept if s > 0.1] == ([] if version == "0.7.5" else [1.2])


def tmux_of(sim: SimServer, pane: str) -> str:
    from herdr_sim.state import Store

    return Store(sim.paths).load().panes[pane].tmux


def test_082_row9_headless_size(sim: SimServer, version: str, tmp_path: Path) -> None:
    pane = workspace(sim, tmp_path)
    run_in(sim, pane, "stty size")
    expected = "24 80" if version == "0.7.5" else "40 120"
    eventually(lambda: expected in screen(sim, pane).splitlines(), what=f"stty size {expected}")
    assert ok(sim.run(["pane", "get", pane]))["pane"]["scroll"]["viewport_rows"] == int(expected.split()[0])


def test_082_row10_layout_current_is_the_caller_from_082(sim: SimServer, version: str, tmp_path: Path) -> None:
    first = ok(sim.run(["workspace", "create", "--cwd", str(tmp_path), "--focus"]))
    caller = ok(sim.run(["tab", "create", "--workspace", first["workspace"]["workspace_id"], "--no-focus"]))["root_pane"]
    layout = ok(sim.run(["pane", "layout", "--current"], HERDR_PANE_ID=caller["pane_id"]))["layout"]
    # orch never sends `layout --current` (it always names --pane); herdr's meaning changed under it.
    assert layout["tab_id"] == (first["tab"]["tab_id"] if version == "0.7.5" else caller["tab_id"])


def test_082_row11_closing_a_workspaces_last_tab(sim: SimServer, version: str, tmp_path: Path) -> None:
    created = ok(sim.run(["workspace", "create", "--cwd", str(tmp_path), "--no-focus"]))
    done = sim.run(["tab", "close", created["tab"]["tab_id"]])
    alive = [w["workspace_id"] for w in ok(sim.run(["workspace", "list"]))["workspaces"]]
    if version == "0.7.5":
        assert (done.returncode, json.loads(done.stderr)["error"]["code"], alive) == (1, "tab_close_failed", [created["workspace"]["workspace_id"]])
    else:
        assert (done.returncode, alive) == (0, [])


def test_082_row12_reads_say_when_older_rows_were_left_out(sim: SimServer, version: str, tmp_path: Path) -> None:
    pane = workspace(sim, tmp_path)
    run_in(sim, pane, "seq 1 30")
    found = ok(sim.run(["pane", "wait-output", pane, "--regex", "^30$", "--lines", "3", "--timeout", "10000"]))
    assert found["read"]["truncated"] is (version != "0.7.5")


def test_082_row13_claude_confirm_dialogs_are_a_documented_deviation() -> None:
    """No screen detection in the simulator: a dialog is `blocked` only when the agent reports it (as the scripted
    start-up dialog does); the deviation is listed where contributors look."""
    doc = (Path(__file__).resolve().parents[2] / "docs" / "simulator.md").read_text()
    assert "Claude Code's `Enter to confirm` dialogs detected as blocked (0.8.2 row 13" in doc


# --- 0.9 DELTA ------------------------------------------------------------------------------------------------------


def test_09_row2_the_wait_gate_needs_working_or_blocked(sim: SimServer, version: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    herdr = boundary(sim)
    pane = workspace(sim, tmp_path)
    herdr.agent_start("gated", kind="codex", pane=pane, timeout_ms=20000)
    real = sim_cli.Cli._observe

    def unrelated_change(self: Any, eng: Any, pin: dict[str, Any]) -> dict[str, Any] | None:
        info = real(self, eng, pin)  # an idle/done change with no working or blocked in between
        return None if info is None else {**info, "agent_status": "done", "state_change_seq": pin["seq"] + 1}

    monkeypatch.setattr(sim_cli.Cli, "_observe", unrelated_change)
    monkeypatch.setattr(sim_cli.Cli, "_active_seq", lambda self, eng, pin: 0)  # nor any working or blocked since
    for key, value in sim.env().items():
        monkeypatch.setenv(key, value)
    code = sim_cli.main(["agent", "prompt", "gated", "hi", "--wait", "--timeout", "1000"])
    assert code == (1 if version in NINE else 0)


def test_09_row2_a_turn_that_came_and_went_between_two_looks_passes_the_gate(sim: SimServer, version: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # herdr observes every lifecycle event; the simulator's call looks every 0.1 s. A turn quicker than that (the call
    # zygote's report-agent calls take milliseconds) was judged "no observed working" and the prompt stalled.
    herdr = boundary(sim)
    pane = workspace(sim, tmp_path)
    herdr.agent_start("quick", kind="codex", pane=pane, timeout_ms=20000)
    real = sim_cli.Cli._observe

    def back_to_idle(self: Any, eng: Any, pin: dict[str, Any]) -> dict[str, Any] | None:
        info = real(self, eng, pin)  # working, then idle again, both since the submission
        return None if info is None else {**info, "agent_status": "idle", "state_change_seq": pin["seq"] + 2}

    monkeypatch.setattr(sim_cli.Cli, "_observe", back_to_idle)
    monkeypatch.setattr(sim_cli.Cli, "_active_seq", lambda self, eng, pin: pin["seq"] + 1)
    for key, value in sim.env().items():
        monkeypatch.setenv(key, value)
    assert sim_cli.main(["agent", "prompt", "quick", "hi", "--wait", "--timeout", "1000"]) == 0


def test_09_row3_a_long_codex_prompt_is_one_ordered_submission(sim: SimServer, version: str, tmp_path: Path) -> None:
    """0.9's paste boundary and expired-submission rejection are Windows-only (not played: docs/simulator.md); on
    every profile a long prompt arrives whole, text then Enter. orch sends each packet as one `agent prompt` word
    (tests/orchestrator/test_herdr_argv_contract.py) and never resends one whose outcome it does not know."""
    herdr = boundary(sim)
    pane = workspace(sim, tmp_path)
    got = tmp_path / "got.txt"
    run_in(sim, pane, f"(exec -a codex cat > {got})")  # a foreground job herdr knows as codex by its argv0
    eventually(lambda: any((a.pane_id, a.agent) == (pane, "codex") for a in herdr.agent_list()), what="cat seen as a codex agent")
    text = " ".join(f"word{n:04d}" for n in range(300))  # 2,699 characters: under a tty's 4,096-byte line
    herdr.agent_prompt(pane, text)
    eventually(lambda: got.exists() and got.read_text() == text + "\n", what="the whole prompt, then Enter")


def test_09_row7_worktree_json_is_still_the_hidden_no_op(sim: SimServer, version: str, git_repo_factory: Any, tmp_path: Path) -> None:
    """0.9's docs do not show worktree `--json` and its source could not be checked: the simulator keeps 0.8.2's
    hidden no-op on every profile (a listed deviation), and orch's worktree forms keep sending it."""
    herdr = boundary(sim)
    repo = git_repo_factory(tmp_path / "repo")
    listed = herdr.worktree_list(cwd=repo.path)
    assert (herdr.calls[-1].argv[-1], [w.path for w in listed.worktrees]) == ("--json", [str(repo.path)])


def test_09_row4_recent_reads_include_what_is_on_screen(sim: SimServer, version: str, tmp_path: Path) -> None:
    pane = workspace(sim, tmp_path)
    run_in(sim, pane, "echo on-screen-line")
    eventually(lambda: "on-screen-line" in screen(sim, pane, "recent").splitlines(), what="the line in a recent read")


def test_09_row5_report_agent_options_before_the_pane(sim: SimServer, version: str, tmp_path: Path) -> None:
    pane = workspace(sim, tmp_path)
    done = sim.run(["pane", "report-agent", "--source", "test", "--agent=codex", "--state", "idle", pane])
    assert done.returncode == (0 if version in NINE else 2)
    ok(sim.run(["pane", "report-agent", pane, "--source", "test", "--agent", "codex", "--state", "working"]))  # the old order always works


def test_09_row6_worktree_trust_repository(sim: SimServer, version: str, git_repo_factory: Any, tmp_path: Path) -> None:
    repo = git_repo_factory(tmp_path / "repo")
    done = sim.run(["worktree", "list", "--cwd", str(repo.path), "--json", "--trust-repository"])
    assert (done.returncode, done.stderr) == ((0, "") if version in NINE else (2, "unknown option: --trust-repository\n"))


def test_09_row8_closing_a_primary_with_worktree_workspaces(sim: SimServer, version: str, git_repo_factory: Any, tmp_path: Path) -> None:
    herdr = boundary(sim)
    repo = git_repo_factory(tmp_path / "repo")
    created = herdr.worktree_create(cwd=repo.path, branch="feat/x", path=tmp_path / "wt")
    primary = next(w.workspace_id for w in herdr.workspace_list() if w.workspace_id != created.workspace.workspace_id)
    if version in NINE:
        with pytest.raises(e.HerdrGroupCloseRequired):
            herdr.workspace_close(primary)
        assert len(herdr.workspace_list()) == 2
        ok(sim.run(["workspace", "close", primary, "--group"]))
    else:
        herdr.workspace_close(primary)
    assert herdr.workspace_list() == ()


@pytest.mark.parametrize("server", ["0.8.2", "0.9.0"])
def test_09_rows11_12_a_client_and_a_server_of_different_releases(tmp_path: Path, version: str, server: str) -> None:
    """`--version` is the client's; `status` tells the server's version and protocol and whether they fit (0.7.5 and
    0.8.2: equal protocols; 0.9: negotiated with a 0.9 server); a pair that does not fit refuses every socket command
    with herdr's `protocol_mismatch`, which orch names with herdr's advice."""
    with SimServer(tmp_path / "sim", {"HERDR_SIM_VERSION": version, "HERDR_SIM_SERVER_VERSION": server}) as sim:
        herdr = HerdrCli(str(sim.paths.bin / "herdr"), env=sim.env(), retry=RetryPolicy(read_attempts=1))
        status = herdr.status()
        client = {"0.7.5": ("0.7.5", 17), "0.8.2": ("0.8.2", 20), "0.9": ("0.9.1", 22), "0.9.5": ("0.9.5", 22)}[version]
        fits = {("0.8.2", "0.8.2"), ("0.9", "0.9.0"), ("0.9.5", "0.9.0")}
        assert (herdr.version().text, status.client.version, status.client.protocol) == (f"herdr {client[0]}", *client)
        assert (status.server.version, status.server.protocol, status.server.compatible, status.update.restart_needed) == (
            server, 20 if server == "0.8.2" else 22, (version, server) in fits, server != client[0])
        if (version, server) in fits:
            assert herdr.workspace_list() == ()
            return
        with pytest.raises(e.HerdrProtocolError) as raised:
            herdr.workspace_list()
        mine, theirs = client[1], status.server.protocol
        said = (f"client protocol {mine} is older than server protocol {theirs}; upgrade the Herdr client before using this command"
                if mine < theirs else
                f"client protocol {mine} is newer than server protocol {theirs}; restart the Herdr server before using this command. "
                f"Stop the old server to use the new version. / Stopping exits pane processes. / "
                f"Run `HERDR_SOCKET_PATH={sim.paths.socket} herdr server stop`, then restart Herdr with the same socket override.")
        assert (raised.value.code, raised.value.message, raised.value.hint) == (
            "protocol_mismatch", f"herdr workspace list: the herdr CLI and server do not fit (protocol_mismatch: {said})",
            "`herdr status` shows both versions: upgrade the herdr CLI, or restart the server with it (`herdr server stop`, then `herdr`)")


def test_09_row9_no_event_stream_is_played_and_orch_polls(tmp_path: Path, version: str) -> None:
    """0.9's subscriptions start with live events only. orch never subscribes (it polls the CLI:
    test_herdr_argv_contract.py), and the simulator offers no events on any profile (a listed deviation)."""
    methods = offline(tmp_path, version).api_schema_methods()
    assert [m for m in methods if m.startswith("events.")] == []


def test_09_row10_no_session_is_gone_in_09(tmp_path: Path, version: str) -> None:
    env = {**os.environ, "HERDR_SIM_HOME": str(tmp_path / "sim"), "HERDR_SIM_VERSION": version}
    done = subprocess.run([herdr_sim(), "--no-session"], env=env, capture_output=True, text=True, timeout=30)
    listed = "--no-session" in subprocess.run([herdr_sim(), "--help"], env=env, capture_output=True, text=True, timeout=30).stdout
    if version in NINE:
        assert (done.returncode, done.stderr, listed) == (2, "unknown option: --no-session\nrun 'herdr --help' for usage\n", False)
    else:  # a launch option: the TUI, which the simulator does not play
        assert (done.returncode, done.stderr, listed) == (2, "herdr-sim: the interactive TUI is not simulated; use a subcommand\n", True)


def test_09_row13_orchs_creates_leave_every_clients_view_alone(sim: SimServer, version: str, tmp_path: Path) -> None:
    """0.9 clients view workspaces and tabs independently; the simulator has no client, only the focus herdr keeps.
    orch's creates and splits (all --no-focus) leave it where it was on every profile."""
    herdr = boundary(sim)
    first = ok(sim.run(["workspace", "create", "--cwd", str(tmp_path), "--focus"]))["root_pane"]["pane_id"]
    before = sim.focus_history()
    created = herdr.workspace_create(cwd=tmp_path, label="orch")
    herdr.tab_create(workspace=created.workspace.workspace_id, cwd=tmp_path)
    herdr.pane_split(created.root_pane.pane_id, direction="down", cwd=tmp_path)
    assert (before[-1], sim.focus_history()) == (first, before)


def test_09_row14_new_errors_map_to_their_types(tmp_path: Path, version: str) -> None:
    """0.9's new `workspace_group_close_required` is HerdrGroupCloseRequired (row 8's test); its `--machine` refusals
    are usage errors, exit 2 with `error: …` on stderr (not JSON), which orch's boundary reads as a usage error.
    Before 0.9 `--machine` is an unknown option, also exit 2. The call is named with its machine (HerdrCall.command)."""
    from orchestrator.errors import HerdrCall
    from orchestrator.herdr import error_for

    env = {**os.environ, "HERDR_SIM_HOME": str(tmp_path / "sim"), "HERDR_SIM_VERSION": version}
    argv = [herdr_sim(), "--machine", "mac", "agent", "list"]
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=30)
    said = "error: unknown machine 'mac'; use `herdr machine list`" if version in NINE else "unknown option: --machine / run 'herdr --help' for usage"
    mapped = error_for(HerdrCall(tuple(argv), done.returncode, done.stdout, done.stderr, 0.0))
    assert (type(mapped), mapped.message) == (e.HerdrUsageError, f"herdr-sim --machine mac agent list: herdr rejected orch's arguments: {said}")


MACHINE_CASES = [
    (["--machine", "mac", "agent", "list"], "error: unknown machine 'mac'; use `herdr machine list`"),
    (["--machine=mac", "pane", "list"], "error: unknown machine 'mac'; use `herdr machine list`"),
    (["--machine", "mac", "status", "--json"], "error: `status --json` is not an API-backed machine command; --machine does not run local management commands or attach a TUI"),
    (["--machine", "mac", "api", "schema"], "error: `api schema` is not an API-backed machine command; --machine does not run local management commands or attach a TUI"),
    (["--machine", "mac", "agent", "attach", "w1:p1"], "error: `agent attach` is not an API-backed machine command; --machine does not run local management commands or attach a TUI"),
    (["--session", "s", "--machine", "mac", "agent", "list"], "error: --machine cannot be combined with other launch options; it uses the saved machine's session"),
    (["--machine", "mac", "--machine", "b", "agent", "list"], "error: --machine can only be specified once"),
    (["--machine"], "error: missing value for --machine"),
    (["--machine="], "error: --machine requires a saved machine label or profile ID"),
    (["--machine", "--help"], "error: --machine requires a saved machine label or profile ID"),
    (["--machine", "mac"], "error: usage: herdr --machine <label-or-id> <command>"),
]


@pytest.mark.parametrize(("argv", "stderr"), MACHINE_CASES, ids=[" ".join(a) for a, _ in MACHINE_CASES])
def test_09_machines_the_machine_prefix(tmp_path: Path, version: str, argv: list[str], stderr: str) -> None:
    """0.9.1's `herdr --machine <selector> <command>` (0.9 DELTA, multi-machine; src/cli/target.rs at b04bda09): the
    prefix rules, the forwarded commands and the selector. The simulator saves no machines (it plays one local
    server), so a well-formed call ends at "unknown machine". Before 0.9.1 `--machine` is an unknown option. orch
    never sends it (test_herdr_argv_contract.py::test_09_machines_orch_drives_only_its_own_herdr)."""
    env = {**os.environ, "HERDR_SIM_HOME": str(tmp_path / "sim"), "HERDR_SIM_VERSION": version}
    done = subprocess.run([herdr_sim(), *argv], env=env, capture_output=True, text=True, timeout=30)
    first = next(a for a in argv if a.startswith("--machine"))
    expected = f"{stderr}\n" if version in NINE else f"unknown option: {first}\nrun 'herdr --help' for usage\n"
    assert (done.returncode, done.stdout, done.stderr) == (2, "", expected)


def test_09_machines_a_machine_word_after_the_command_is_payload(sim: SimServer, version: str, tmp_path: Path) -> None:
    pane = workspace(sim, tmp_path)
    ok(sim.run(["pane", "send-text", pane, "--machine"]))
    eventually(lambda: "$ --machine" in screen(sim, pane, "visible"), what="--machine typed as text")


def test_09_row15_api_schema_methods(tmp_path: Path, version: str) -> None:
    methods = offline(tmp_path, version).api_schema_methods()
    added = {"workspace.move_block", "pane.input.set"}
    assert (added <= set(methods)) is (version != "0.7.5")


def test_09_row16_panes_say_they_run_in_herdr(sim: SimServer, version: str, tmp_path: Path) -> None:
    pane = workspace(sim, tmp_path)
    run_in(sim, pane, 'echo "tp=${TERM_PROGRAM:-none}"')
    expected = "tp=herdr" if version in NINE else "tp=none"
    eventually(lambda: expected in screen(sim, pane).splitlines(), what=expected)


# --- 0.9.5 DELTA (0.9.2-0.9.5) ----------------------------------------------------------------------------------------


def test_095_rows1_3_completion_seq_counts_finished_turns_and_a_done_flip_never_moves_it(sim: SimServer, version: str, tmp_path: Path) -> None:
    """0.9.2 added `completion_seq` to agent info (row 1), an optional field only (row 3: the rest is unchanged). It
    moves when a turn finishes; reading the agent (a done -> idle flip when its tab is seen) never moves it."""
    herdr = boundary(sim)
    pane = workspace(sim, tmp_path)
    herdr.agent_start("counted", kind="codex", pane=pane, timeout_ms=20000)
    before = ok(sim.run(["agent", "get", "counted"]))["agent"]
    added = {"completion_seq"} if version == "0.9.5" else set()
    assert set(before) == {"terminal_id", "name", "agent", "agent_status", "workspace_id", "tab_id", "pane_id", "focused",
                           "interactive_ready", "state_change_seq", "cwd", "foreground_cwd", "revision"} | added
    herdr.agent_prompt("counted", "say hi", wait=True, timeout_ms=20000)
    after = herdr.agent_get("counted")
    if version != "0.9.5":
        assert (before.get("completion_seq"), after.completion_seq) == (None, None)
        return
    assert after.completion_seq == before["completion_seq"] + 1
    herdr.agent_focus("counted")  # the turn seen: done -> idle, no new completion
    seen = herdr.agent_get("counted")
    assert (seen.agent_status, seen.completion_seq) == ("idle", after.completion_seq)


def test_095_row2_restore_error_is_shown_only_when_a_restore_failed(sim: SimServer, version: str, tmp_path: Path) -> None:
    """The simulator never restores panes (every server starts empty), so the test records a failed restore itself."""
    from herdr_sim.state import Store

    herdr = boundary(sim)
    pane = workspace(sim, tmp_path)
    assert herdr.pane_get(pane).restore_error is None
    with Store(sim.paths).transaction() as world:
        world.panes[pane].restore_error = "resume command exited with status 1"
    expected = "resume command exited with status 1" if version == "0.9.5" else None
    assert (herdr.pane_get(pane).restore_error, ok(sim.run(["pane", "get", pane]))["pane"].get("restore_error")) == (expected, expected)


def test_095_rows4_5_machine_status_and_reconnect(tmp_path: Path, version: str) -> None:
    """0.9.2's `machine status [<label-or-id>] [--json]` and `machine reconnect <label-or-id>`: local commands over
    the saved machines (none saved here; tests/herdr_sim/test_machines.py saves some). orch asks them only in a hosts preflight
    (test_herdr_argv_contract.py::test_095_rows4_5_orch_asks_about_machines_only_in_a_hosts_preflight)."""
    env = {**os.environ, "HERDR_SIM_HOME": str(tmp_path / "sim"), "HERDR_SIM_VERSION": version}

    def run(*argv: str) -> tuple[int, str, str]:
        done = subprocess.run([herdr_sim(), *argv], env=env, capture_output=True, text=True, timeout=30)
        return done.returncode, done.stdout, done.stderr

    calls = [("machine", "status", "--json"), ("machine", "status"), ("machine", "status", "mac"), ("machine", "reconnect", "mac"),
             ("machine", "reconnect"), ("machine", "list", "--json")]
    if version != "0.9.5":
        assert [run(*argv) for argv in calls] == [(2, "", "unknown command: machine\nrun 'herdr --help' for usage\n")] * len(calls)
        return
    unknown = (2, "", "error: unknown machine 'mac'; use `herdr machine list`\n")
    usage = (2, "", "error: usage: herdr machine list [--json] | herdr machine add <ssh-target> [--label L] [--remote-session NAME] | "
             "herdr machine status [<label-or-id>] [--json] | herdr machine reconnect <label-or-id>\n")
    assert [run(*argv) for argv in calls] == [(0, '{"machines": []}\n', ""), (0, "no saved machines\n", ""), unknown, unknown, usage,
                                              (0, '{"machines": []}\n', "")]


def test_095_row6_a_reported_resume_command(sim: SimServer, version: str, tmp_path: Path) -> None:
    """0.9.2: `pane report-agent[-session] … -- RESUME_ARG…` records the command that resumes the agent's session
    after a restart (a plain command name first). The simulator keeps it in its state and shows it nowhere, as
    herdr's documented output does not show it either."""
    from herdr_sim.state import Store

    pane = workspace(sim, tmp_path)
    session = sim.run(["pane", "report-agent-session", pane, "--source", "orch", "--agent", "codex", "--", "codex", "resume", "--last"])
    state = sim.run(["pane", "report-agent", pane, "--source", "t", "--agent", "codex", "--state", "idle", "--", "codex", "resume", "--last", "-m", "o3"])
    bad = sim.run(["pane", "report-agent-session", pane, "--source", "orch", "--agent", "codex", "--", "/bin/codex"])
    recorded = Store(sim.paths).load().panes[pane].resume_command
    if version != "0.9.5":
        assert (session.returncode, state.returncode, bad.returncode, recorded) == (2, 2, 2, None)
        return
    assert (session.returncode, state.returncode, recorded) == (0, 0, ["codex", "resume", "--last", "-m", "o3"])
    assert (bad.returncode, bad.stderr) == (2, "the resume command must start with a plain command name\n")


def test_095_row10_codex_unknown_but_interactive_ready_is_ready(version: str, tmp_path: Path) -> None:
    """0.9.3: a codex screen no detection rule matches is `unknown` (other kinds: the idle fallback), and `agent start`
    takes an `unknown` codex that is interactive-ready as ready (the simulator's launch settles on it)."""
    from herdr_sim import detect
    from herdr_sim.engine import Engine
    from herdr_sim.paths import Paths
    from herdr_sim.state import Pane, World

    newest = version == "0.9.5"
    assert (detect.explain("codex", "", "", codex_unknown=newest).state, detect.explain("claude", "", "", codex_unknown=newest).state) == (
        "unknown" if newest else "idle", "idle")
    pane = Pane(pane_id="w1:p1", terminal_id="t1", workspace_id="w1", tab_id="w1:t1", tmux="%1", shell_pid=1, cwd=str(tmp_path),
                detected="codex", screen_state="unknown", name="cx", launch_kind="codex", launch_typed_at=0.0, launch_deadline=60.0)
    engine = Engine(Paths(tmp_path / "sim"), World(settle_ms=300, panes={"w1:p1": pane}), now=1.0)
    engine.settle(pane)
    assert (pane.state, pane.interactive_ready, pane.launch_kind) == ("unknown", newest, None if newest else "codex")


def test_095_row12_new_panes_lose_inherited_session_markers(tmp_path: Path, version: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CLAUDECODE", "1")  # the server's environment, as if herdr were started inside Claude Code
    with SimServer(tmp_path / "sim", {"HERDR_SIM_VERSION": version}) as sim:
        pane = workspace(sim, tmp_path)
        run_in(sim, pane, 'echo "cc=${CLAUDECODE:-none}"')
        expected = "cc=none" if version == "0.9.5" else "cc=1"
        eventually(lambda: expected in screen(sim, pane).splitlines(), what=expected)


# --- every success answer of the 0.8.2 profile is a 0.8.2 success_response --------------------------------------------


def test_082_every_success_json_validates_against_the_082_schema(tmp_path: Path, shared_dir: Path, git_repo_factory: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    import jsonschema

    monkeypatch.setenv("HERDR_SIM_VERSION", "0.8.2")
    doc = json.loads((shared_dir / "herdr-0.8.2" / "upstream" / "herdr-api.schema.json").read_text())
    validator = jsonschema.Draft202012Validator({**doc, "$ref": "#/schemas/success_response"})
    repo = git_repo_factory(tmp_path / "repo")
    checked: set[str] = set()
    with SimServer(tmp_path / "sim", {"HERDR_SIM_SETTLE_MS": "300", "HERDR_SIM_VERSION": "0.8.2"}) as sim:

        def call(*argv: str) -> dict[str, Any]:
            done = sim.run(list(argv))
            assert done.returncode == 0, (argv, done.stderr)
            value = json.loads(done.stdout)
            validator.validate(value)
            checked.add(value["result"]["type"])
            return dict(value["result"])

        ws = call("workspace", "create", "--cwd", str(tmp_path), "--label", "w", "--no-focus")
        pane = ws["root_pane"]["pane_id"]
        call("workspace", "list")
        call("workspace", "get", ws["workspace"]["workspace_id"])
        tab = call("tab", "create", "--workspace", ws["workspace"]["workspace_id"], "--no-focus")
        call("tab", "list")
        call("tab", "rename", tab["tab"]["tab_id"], "renamed")
        call("tab", "close", tab["tab"]["tab_id"])
        call("pane", "list")
        call("pane", "get", pane)
        call("pane", "current", "--pane", pane)
        call("pane", "layout", "--pane", pane)
        split = call("pane", "split", "--pane", pane, "--direction", "down", "--no-focus")["pane"]["pane_id"]
        call("pane", "rename", split, "side")
        call("pane", "move", split, "--new-tab", "--workspace", ws["workspace"]["workspace_id"], "--no-focus")
        created = call("worktree", "create", "--cwd", str(repo.path), "--branch", "feat/s", "--path", str(tmp_path / "wt"), "--no-focus", "--json")
        call("worktree", "list", "--cwd", str(repo.path), "--json")
        call("worktree", "open", "--cwd", str(repo.path), "--path", str(tmp_path / "wt"), "--no-focus", "--json")
        agent_pane = created["root_pane"]["pane_id"]
        call("agent", "start", "checked", "--kind", "codex", "--pane", agent_pane, "--timeout", "20000")
        call("agent", "list")
        call("agent", "get", "checked")
        call("agent", "prompt", "checked", "hello", "--wait", "--timeout", "20000")
        call("agent", "wait", "checked", "--timeout", "20000")
        call("agent", "send-keys", "checked", "shift+tab")
        call("agent", "rename", "checked", "checked2")
        run_in(sim, pane, "echo matched-line")
        call("pane", "wait-output", pane, "--match", "matched-line", "--timeout", "10000")
        call("worktree", "remove", "--workspace", created["workspace"]["workspace_id"], "--force", "--json")
        call("pane", "close", split)
    assert checked == {
        "workspace_created", "workspace_list", "workspace_info", "tab_created", "tab_list", "tab_info", "ok", "pane_list",
        "pane_info", "pane_current", "pane_layout", "pane_move", "worktree_created", "worktree_list", "worktree_opened",
        "agent_started", "agent_list", "agent_info", "agent_prompted", "output_matched", "worktree_removed",
    }
