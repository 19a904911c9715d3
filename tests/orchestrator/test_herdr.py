"""HerdrCli builds exactly the argv herdr 0.7.5 accepts, maps every exit and error code, and retries only safe calls."""

from __future__ import annotations

import inspect
import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from orchestrator import errors as e
from orchestrator import herdr_models as m
from orchestrator.errors import ExitCode, HerdrCall
from orchestrator.herdr import Herdr, HerdrCli, RetryPolicy, echo_line

DATA = Path(__file__).parent / "data" / "herdr"
PROMPT = "[herdr-orchestration run=w1:p1-20260101T000000Z task=fix-login from=controller kind=follow-up reply-to=w1:p1]\nPlease also run the tests; it's fine to say \"no\"."


def sample(name: str) -> str:
    return (DATA / name).read_text()


def result_of(name: str) -> Any:
    return m.SuccessEnvelope.model_validate_json(sample(name)).result


class FakeRunner:
    """The runner seam: answers scripted (returncode, stdout, stderr) tuples or raises, and records what it was asked."""

    def __init__(self, *answers: tuple[int, str, str] | BaseException) -> None:
        self.answers = list(answers)
        self.argvs: list[list[str]] = []
        self.timeouts: list[float] = []
        self.envs: list[dict[str, str]] = []

    def __call__(self, argv: Sequence[str], *, env: Mapping[str, str], timeout: float) -> subprocess.CompletedProcess[str]:
        self.argvs.append(list(argv))
        self.timeouts.append(timeout)
        self.envs.append(dict(env))
        answer = self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]
        if isinstance(answer, BaseException):
            raise answer
        rc, out, err = answer
        return subprocess.CompletedProcess(list(argv), rc, out, err)


class Ticks:
    """A clock that advances 0.25 s per reading, so recorded call durations are exact."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        self.now += 0.25
        return self.now


def make_cli(runner: FakeRunner, sleeps: list[float] | None = None, **kwargs: Any) -> HerdrCli:
    return HerdrCli("herdr", runner=runner, sleep=(sleeps if sleeps is not None else []).append, clock=Ticks(), **kwargs)


def ok(stdout: str = "") -> tuple[int, str, str]:
    return (0, stdout, "")


# (id, call, argv after the binary, stdout herdr prints, expected return value)
ARGV_CASES: list[tuple[str, Callable[[HerdrCli], Any], list[str], str, Any]] = [
    ("version", lambda h: h.version(), ["--version"], "herdr 0.7.5\n", m.HerdrVersion(text="herdr 0.7.5", version="0.7.5")),
    ("help_text", lambda h: h.help_text(), ["--help"], "herdr — terminal workspace manager\n", "herdr — terminal workspace manager\n"),
    ("status", lambda h: h.status(), ["status", "--json"], sample("status.json"), m.HerdrStatus.model_validate_json(sample("status.json"))),
    ("session_list", lambda h: h.session_list(), ["session", "list", "--json"], sample("session_list.json"), m.SessionList.model_validate_json(sample("session_list.json"))),
    ("workspace_list", lambda h: h.workspace_list(), ["workspace", "list"], sample("workspace_list.json"), result_of("workspace_list.json").workspaces),
    ("workspace_create:bare", lambda h: h.workspace_create(), ["workspace", "create", "--no-focus"], sample("workspace_create.json"), result_of("workspace_create.json")),
    (
        "workspace_create",
        lambda h: h.workspace_create(cwd=Path("/home/me/src/acme/api"), label="api", env={"ORCH_RUN": "r1", "EMPTY": ""}),
        ["workspace", "create", "--cwd", "/home/me/src/acme/api", "--label", "api", "--env", "ORCH_RUN=r1", "--env", "EMPTY=", "--no-focus"],
        sample("workspace_create.json"),
        result_of("workspace_create.json"),
    ),
    ("workspace_get", lambda h: h.workspace_get("w3"), ["workspace", "get", "w3"], sample("workspace_get.json"), result_of("workspace_get.json").workspace),
    ("workspace_close", lambda h: h.workspace_close("w3"), ["workspace", "close", "w3"], sample("workspace_close.json"), None),
    ("tab_list:all", lambda h: h.tab_list(), ["tab", "list"], sample("tab_list.json"), result_of("tab_list.json").tabs),
    ("tab_list", lambda h: h.tab_list(workspace="w1"), ["tab", "list", "--workspace", "w1"], sample("tab_list.json"), result_of("tab_list.json").tabs),
    (
        "tab_create",
        lambda h: h.tab_create(workspace="w1", cwd="/home/me/project", label="project-feat-x"),
        ["tab", "create", "--workspace", "w1", "--cwd", "/home/me/project", "--label", "project-feat-x", "--no-focus"],
        sample("tab_create.json"),
        result_of("tab_create.json"),
    ),
    ("tab_rename", lambda h: h.tab_rename("w1:t2", "project feat x"), ["tab", "rename", "w1:t2", "project feat x"], sample("tab_rename.json"), result_of("tab_rename.json").tab),
    ("tab_close", lambda h: h.tab_close("w1:t2"), ["tab", "close", "w1:t2"], sample("tab_close.json"), None),
    ("pane_current", lambda h: h.pane_current(), ["pane", "current", "--current"], sample("pane_current.json"), result_of("pane_current.json").pane),
    ("pane_current:pane", lambda h: h.pane_current(pane="w1:p1"), ["pane", "current", "--pane", "w1:p1"], sample("pane_current.json"), result_of("pane_current.json").pane),
    ("pane_list:all", lambda h: h.pane_list(), ["pane", "list"], sample("pane_list.json"), result_of("pane_list.json").panes),
    ("pane_list", lambda h: h.pane_list(workspace="w3"), ["pane", "list", "--workspace", "w3"], sample("pane_list.json"), result_of("pane_list.json").panes),
    ("pane_get", lambda h: h.pane_get("w1:p2"), ["pane", "get", "w1:p2"], sample("pane_get.json"), result_of("pane_get.json").pane),
    ("pane_layout", lambda h: h.pane_layout("w1:p1"), ["pane", "layout", "--pane", "w1:p1"], sample("pane_layout.json"), result_of("pane_layout.json").layout),
    (
        "pane_split",
        lambda h: h.pane_split("w1:p1", direction="right", cwd="/home/me/project"),
        ["pane", "split", "--pane", "w1:p1", "--direction", "right", "--cwd", "/home/me/project", "--no-focus"],
        sample("pane_split.json"),
        result_of("pane_split.json").pane,
    ),
    (
        "pane_split:ratio-env",
        lambda h: h.pane_split("w1:p1", direction="down", ratio=0.4, env={"A": "b=c"}),
        ["pane", "split", "--pane", "w1:p1", "--direction", "down", "--ratio", "0.4", "--env", "A=b=c", "--no-focus"],
        sample("pane_split.json"),
        result_of("pane_split.json").pane,
    ),
    (
        "pane_move_new_tab",
        lambda h: h.pane_move_new_tab("w3:p1", workspace="w1", label="project-feat-x"),
        ["pane", "move", "w3:p1", "--new-tab", "--workspace", "w1", "--label", "project-feat-x", "--no-focus"],
        sample("pane_move_new_tab.json"),
        result_of("pane_move_new_tab.json").move_result,
    ),
    ("pane_read", lambda h: h.pane_read("w1:p2"), ["pane", "read", "w1:p2", "--source", "recent"], sample("pane_read.txt"), sample("pane_read.txt")),
    (
        "pane_read:lines",
        lambda h: h.pane_read("w1:p2", source="recent-unwrapped", lines=60),
        ["pane", "read", "w1:p2", "--source", "recent-unwrapped", "--lines", "60"],
        "",
        "",
    ),
    ("pane_send_text", lambda h: h.pane_send_text("w1:p2", "/exit"), ["pane", "send-text", "w1:p2", "/exit"], "", None),
    ("pane_send_keys", lambda h: h.pane_send_keys("w1:p2", "Enter", "ctrl+c"), ["pane", "send-keys", "w1:p2", "Enter", "ctrl+c"], "", None),
    ("pane_run", lambda h: h.pane_run("w1:p2", "git status --short"), ["pane", "run", "w1:p2", "git status --short"], "", None),
    ("pane_report_agent_session", lambda h: h.pane_report_agent_session("w1:p2", source="orch", agent="pi", session=m.AgentSession(source="pi", agent="pi", kind="path", value="/s/1.jsonl"), resume=["pi", "--session", "/s/1.jsonl"]),
     ["pane", "report-agent-session", "w1:p2", "--source", "orch", "--agent", "pi", "--agent-session-path", "/s/1.jsonl", "--", "pi", "--session", "/s/1.jsonl"], "", None),
    ("pane_close", lambda h: h.pane_close("w1:p2"), ["pane", "close", "w1:p2"], sample("pane_close.json"), None),
    ("pane_rename", lambda h: h.pane_rename("w1:p1", "controller"), ["pane", "rename", "w1:p1", "controller"], sample("pane_rename.json"), result_of("pane_rename.json").pane),
    ("pane_rename:clear", lambda h: h.pane_rename("w1:p1", None), ["pane", "rename", "w1:p1", "--clear"], sample("pane_rename.json"), result_of("pane_rename.json").pane),
    ("worktree_list", lambda h: h.worktree_list(workspace="w1"), ["worktree", "list", "--workspace", "w1", "--json"], sample("worktree_list.json"), result_of("worktree_list.json")),
    (
        "worktree_create",
        lambda h: h.worktree_create(workspace="w1", branch="feat/x", path="/home/me/src/acme/project.worktrees/project-feat-x", label="project-feat-x"),
        ["worktree", "create", "--workspace", "w1", "--branch", "feat/x", "--path", "/home/me/src/acme/project.worktrees/project-feat-x", "--label", "project-feat-x", "--no-focus", "--json"],
        sample("worktree_create.json"),
        result_of("worktree_create.json"),
    ),
    (
        "worktree_create:cwd-base",
        lambda h: h.worktree_create(cwd=Path("/home/me/project"), branch="fix/y", base="origin/main"),
        ["worktree", "create", "--cwd", "/home/me/project", "--branch", "fix/y", "--base", "origin/main", "--no-focus", "--json"],
        sample("worktree_create.json"),
        result_of("worktree_create.json"),
    ),
    (
        "worktree_open",
        lambda h: h.worktree_open(workspace="w1", branch="feat/x", label="project-feat-x"),
        ["worktree", "open", "--workspace", "w1", "--branch", "feat/x", "--label", "project-feat-x", "--no-focus", "--json"],
        sample("worktree_open.json"),
        result_of("worktree_open.json"),
    ),
    ("worktree_remove", lambda h: h.worktree_remove("w3"), ["worktree", "remove", "--workspace", "w3", "--json"], sample("worktree_remove.json"), result_of("worktree_remove.json")),
    ("worktree_remove:force", lambda h: h.worktree_remove("w3", force=True), ["worktree", "remove", "--workspace", "w3", "--force", "--json"], sample("worktree_remove.json"), result_of("worktree_remove.json")),
    ("agent_list", lambda h: h.agent_list(), ["agent", "list"], sample("agent_list.json"), result_of("agent_list.json").agents),
    ("agent_get", lambda h: h.agent_get("reviewer"), ["agent", "get", "reviewer"], sample("agent_get.json"), result_of("agent_get.json").agent),
    ("agent_start", lambda h: h.agent_start("reviewer", kind="codex", pane="w1:p2"), ["agent", "start", "reviewer", "--kind", "codex", "--pane", "w1:p2"], sample("agent_start.json"), result_of("agent_start.json")),
    (
        "agent_start:args",
        lambda h: h.agent_start("reviewer", kind="codex", pane="w1:p2", timeout_ms=60000, args=("-m", "gpt-5.4")),
        ["agent", "start", "reviewer", "--kind", "codex", "--pane", "w1:p2", "--timeout", "60000", "--", "-m", "gpt-5.4"],
        sample("agent_start.json"),
        result_of("agent_start.json"),
    ),
    ("agent_prompt", lambda h: h.agent_prompt("reviewer", PROMPT), ["agent", "prompt", "reviewer", PROMPT], sample("agent_prompt.json"), result_of("agent_prompt.json")),
    (
        "agent_prompt:wait",
        lambda h: h.agent_prompt("reviewer", "--wait", wait=True, until=("done", "blocked"), timeout_ms=60000),
        ["agent", "prompt", "reviewer", "--wait", "--wait", "--until", "done", "--until", "blocked", "--timeout", "60000"],
        sample("agent_prompt.json"),
        result_of("agent_prompt.json"),
    ),
    ("agent_wait", lambda h: h.agent_wait("reviewer", timeout_ms=60000), ["agent", "wait", "reviewer", "--timeout", "60000"], sample("agent_wait.json"), result_of("agent_wait.json").agent),
    (
        "agent_wait:until",
        lambda h: h.agent_wait("w1:p2", until=("idle", "done"), timeout_ms=1000),
        ["agent", "wait", "w1:p2", "--until", "idle", "--until", "done", "--timeout", "1000"],
        sample("agent_wait.json"),
        result_of("agent_wait.json").agent,
    ),
    (
        "agent_read",
        lambda h: h.agent_read("reviewer", source="recent-unwrapped", lines=160),
        ["agent", "read", "reviewer", "--source", "recent-unwrapped", "--lines", "160"],
        sample("pane_read.txt"),
        sample("pane_read.txt"),
    ),
    ("agent_send_keys", lambda h: h.agent_send_keys("reviewer", "ctrl+c"), ["agent", "send-keys", "reviewer", "ctrl+c"], sample("agent_send_keys.json"), None),
    ("agent_rename", lambda h: h.agent_rename("w1:p2", "docs"), ["agent", "rename", "w1:p2", "docs"], sample("agent_rename.json"), result_of("agent_rename.json").agent),
    ("agent_rename:clear", lambda h: h.agent_rename("w1:p2", None), ["agent", "rename", "w1:p2", "--clear"], sample("agent_rename.json"), result_of("agent_rename.json").agent),
    ("agent_focus", lambda h: h.agent_focus("reviewer"), ["agent", "focus", "reviewer"], sample("agent_focus.json"), result_of("agent_focus.json").agent),
    ("agent_explain", lambda h: h.agent_explain("reviewer"), ["agent", "explain", "reviewer", "--json"], sample("agent_explain.json"), m.AgentExplain.model_validate_json(sample("agent_explain.json"))),
]


@pytest.mark.parametrize(("call", "argv", "stdout", "expected"), [case[1:] for case in ARGV_CASES], ids=[case[0] for case in ARGV_CASES])
def test_each_method_runs_exact_argv_and_returns_typed_result(call: Callable[[HerdrCli], Any], argv: list[str], stdout: str, expected: Any) -> None:
    runner = FakeRunner(ok(stdout))
    herdr = make_cli(runner)
    assert call(herdr) == expected
    assert runner.argvs == [["herdr", *argv]]


def test_every_protocol_method_has_an_argv_case() -> None:
    covered = {case[0].split(":")[0] for case in ARGV_CASES}
    # These two parse text and have their own tests below, argv included.
    assert set(_protocol_methods()) - covered == {"integration_status", "api_schema_methods", "features"}


def _protocol_methods() -> list[str]:
    return sorted(name for name, value in vars(Herdr).items() if callable(value) and not name.startswith("_"))


# Asked only of a client built for another host (Engine.herdr_on, orchestrator/hosts.py), never of the engine's Herdr.
HOST_ONLY = {"machine_status", "server_status"}


def test_herdr_cli_matches_the_protocol_signature_for_signature() -> None:
    public = sorted(name for name, value in vars(HerdrCli).items() if callable(value) and not name.startswith("_") and name not in HOST_ONLY)
    assert public == _protocol_methods()
    mismatched = [name for name in public if inspect.signature(getattr(HerdrCli, name)) != inspect.signature(getattr(Herdr, name))]
    assert mismatched == []


def test_session_is_passed_before_the_command() -> None:
    runner = FakeRunner(ok(sample("agent_list.json")))
    make_cli(runner, session="acme").agent_list()
    assert runner.argvs == [["herdr", "--session", "acme", "agent", "list"]]


def test_env_overlay_is_added_to_the_process_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ORCH_TEST_INHERITED", "yes")
    runner = FakeRunner(ok(sample("agent_list.json")))
    make_cli(runner, env={"HERDR_SOCKET_PATH": "/tmp/sim.sock"}).agent_list()
    assert (runner.envs[0]["HERDR_SOCKET_PATH"], runner.envs[0]["ORCH_TEST_INHERITED"]) == ("/tmp/sim.sock", "yes")


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda h: h.agent_prompt("a", "x", timeout_ms=1000), "agent_prompt: until and timeout_ms need wait=True (herdr exits 2 otherwise)"),
        (lambda h: h.agent_prompt("a", "x", until=("done",)), "agent_prompt: until and timeout_ms need wait=True (herdr exits 2 otherwise)"),
        (lambda h: h.agent_prompt("a", "x", wait=True), "agent_prompt: wait=True needs timeout_ms; herdr would otherwise wait forever"),
        (lambda h: h.agent_prompt("a", "--session"), "herdr would take the argv word '--session' as a session flag"),
        (lambda h: h.tab_rename("w1:t1", "--session=other"), "herdr would take the argv word '--session=other' as a session flag"),
        (lambda h: h.pane_rename("w1:p1", "--clear"), "label '--clear' would be read as a herdr flag"),
        (lambda h: h.agent_rename("w1:p1", "--clear"), "name '--clear' would be read as a herdr flag"),
        (lambda h: h.worktree_create(workspace="w1", cwd="/x"), "give workspace or cwd, not both (herdr exits 2)"),
        (lambda h: h.worktree_open(workspace="w1"), "worktree_open needs exactly one of path or branch"),
        (lambda h: h.workspace_create(env={"A=B": "c"}), "invalid env key 'A=B'"),
        (lambda h: h.pane_send_keys("w1:p1"), "pane_send_keys needs at least one key"),
    ],
)
def test_argv_herdr_would_misread_is_refused_before_running(call: Callable[[HerdrCli], Any], message: str) -> None:
    runner = FakeRunner(ok())
    with pytest.raises(ValueError) as info:
        call(make_cli(runner))
    assert (str(info.value), runner.argvs) == (message, [])


def test_agent_start_args_after_double_dash_may_look_like_flags() -> None:
    runner = FakeRunner(ok(sample("agent_start.json")))
    make_cli(runner).agent_start("w", kind="pi", pane="w1:p2", args=("--session", "s1"))
    assert runner.argvs[0][-3:] == ["--", "--session", "s1"]


# --- exit codes and error codes ---

NO_SERVER = sample("stderr_no_server.txt")


def _err(code: str, message: str, request: str = "cli:agent:get") -> str:
    return json.dumps({"id": request, "error": {"code": code, "message": message}}, separators=(",", ":")) + "\n"


# (case, returncode, stdout, stderr, class, .code, str(error), exit code) -- CONTRACT.md sections cited per case.
ERROR_CASES = [
    ("§0 usage err", 2, "", "unknown option: --json\n", e.HerdrUsageError, None, "herdr agent get: herdr rejected orch's arguments: unknown option: --json", ExitCode.INTERNAL),
    ("§0 group help on exit 2", 2, "", "herdr agent commands:\n  herdr agent list\n", e.HerdrUsageError, None, "herdr agent get: herdr rejected orch's arguments: herdr agent commands: / herdr agent list", ExitCode.INTERNAL),
    ("§0 no server", 1, "", NO_SERVER, e.HerdrUnavailable, None, "herdr agent get: herdr server is not running", ExitCode.HERDR_UNAVAILABLE),
    ("§0 refused", 1, "", sample("stderr_connection_refused.txt"), e.HerdrUnavailable, None, "herdr agent get: herdr server is not running", ExitCode.HERDR_UNAVAILABLE),
    ("§0 other os error", 1, "", 'Error: Os { code: 13, kind: PermissionDenied, message: "Permission denied" }\n', e.HerdrUnavailable, None, "herdr agent get: cannot reach the herdr server (PermissionDenied)", ExitCode.HERDR_UNAVAILABLE),
    ("§0 Error: Custom", 1, "", sample("stderr_custom.txt"), e.HerdrUsageError, None, 'herdr agent get: herdr rejected a value orch passed: Error: Custom { kind: Other, error: "invalid --lines value: x" }', ExitCode.INTERNAL),
    ("§0 protocol_mismatch", 1, "", _err("protocol_mismatch", "client protocol 17 is older than server protocol 20; upgrade the Herdr client before using this command"), e.HerdrProtocolError, "protocol_mismatch", "herdr agent get: the herdr CLI and server do not fit (protocol_mismatch: client protocol 17 is older than server protocol 20; upgrade the Herdr client before using this command)", ExitCode.INTERNAL),
    ("§8 agent_not_found", 1, "", sample("error_agent_not_found.json"), e.HerdrNotFound, "agent_not_found", "herdr agent get: agent_not_found: agent target reviewer not found", ExitCode.FAILURE),
    ("§7 pane_not_found", 1, "", _err("pane_not_found", "pane w1:p9 not found"), e.HerdrNotFound, "pane_not_found", "herdr agent get: pane_not_found: pane w1:p9 not found", ExitCode.FAILURE),
    ("§5 workspace_not_found", 1, "", _err("workspace_not_found", "workspace w9 not found"), e.HerdrNotFound, "workspace_not_found", "herdr agent get: workspace_not_found: workspace w9 not found", ExitCode.FAILURE),
    ("§6 tab_not_found", 1, "", _err("tab_not_found", "tab w1:t9 not found"), e.HerdrNotFound, "tab_not_found", "herdr agent get: tab_not_found: tab w1:t9 not found", ExitCode.FAILURE),
    ("§8 agent_target_ambiguous", 1, "", _err("agent_target_ambiguous", "agent target x is ambiguous"), e.HerdrTargetAmbiguous, "agent_target_ambiguous", "herdr agent get: agent_target_ambiguous: agent target x is ambiguous", ExitCode.FAILURE),
    ("§8.2 agent_not_ready", 1, "", _err("agent_not_ready", "agent docs-bot is not an active named agent"), e.HerdrAgentNotReady, "agent_not_ready", "herdr agent get: agent_not_ready: agent docs-bot is not an active named agent", ExitCode.FAILURE),
    ("§8.4 agent_not_running", 1, "", _err("agent_not_running", "agent is no longer running"), e.HerdrAgentNotRunning, "agent_not_running", "herdr agent get: agent_not_running: agent is no longer running", ExitCode.FAILURE),
    ("§8.5 agent_pane_busy", 1, "", _err("agent_pane_busy", "pane w1:p2 is busy"), e.HerdrPaneBusy, "agent_pane_busy", "herdr agent get: agent_pane_busy: pane w1:p2 is busy", ExitCode.FAILURE),
    ("§8.5 agent_name_taken", 1, "", _err("agent_name_taken", "agent name x is already used; candidates: terminal_id=term_1 pane_id=w1:p2"), e.HerdrNameTaken, "agent_name_taken", "herdr agent get: agent_name_taken: agent name x is already used; candidates: terminal_id=term_1 pane_id=w1:p2", ExitCode.FAILURE),
    ("§8.4 timeout", 1, "", _err("timeout", "timed out waiting for agent status"), e.HerdrWaitExpired, "timeout", "herdr agent get: timeout: timed out waiting for agent status", ExitCode.FAILURE),
    ("§8.3 agent_prompt_stalled", 1, "", sample("error_agent_prompt_stalled.json"), e.HerdrPromptStalled, "agent_prompt_stalled", "herdr agent get: agent_prompt_stalled: agent prompt produced no observed state change within 5000 ms; status is idle and state_change_seq remained 7", ExitCode.FAILURE),
    ("§7 confirmation_required", 1, "", sample("error_confirmation_required.json"), e.HerdrConfirmationRequired, "confirmation_required", "herdr agent get: confirmation_required: closing this pane would close a worktree group", ExitCode.FAILURE),
    ("§9 worktree_create_failed (git stderr)", 1, "", _err("worktree_create_failed", "fatal: '/w/x' already exists\n"), e.HerdrWorktreeCreateFailed, "worktree_create_failed", "herdr agent get: worktree_create_failed: fatal: '/w/x' already exists", ExitCode.FAILURE),
    ("§9 worktree_operation_in_progress", 1, "", _err("worktree_operation_in_progress", "busy"), e.HerdrWorktreeBusy, "worktree_operation_in_progress", "herdr agent get: worktree_operation_in_progress: busy", ExitCode.FAILURE),
    ("§9 dirty_worktree_requires_force", 1, "", _err("dirty_worktree_requires_force", "fatal: '/w/x' contains modified or untracked files, use --force to delete it\n"), e.HerdrDirtyWorktree, "dirty_worktree_requires_force", "herdr agent get: dirty_worktree_requires_force: fatal: '/w/x' contains modified or untracked files, use --force to delete it", ExitCode.FAILURE),
    ("§11 server_unavailable", 1, "", _err("server_unavailable", "server unavailable"), e.HerdrUnavailable, "server_unavailable", "herdr agent get: server_unavailable: server unavailable", ExitCode.HERDR_UNAVAILABLE),
    ("0.8.2 DELTA 2 server_not_running", 1, "", _err("server_not_running", "no herdr server is running at /run/h.sock; run `herdr` to start or attach it"), e.HerdrUnavailable, "server_not_running", "herdr agent get: herdr server is not running (server_not_running: no herdr server is running at /run/h.sock; run `herdr` to start or attach it)", ExitCode.HERDR_UNAVAILABLE),
    ("0.8.2 DELTA 4 agent_blocked", 1, "", _err("agent_blocked", "agent w1 is blocked and requires interactive input"), e.HerdrAgentBlocked, "agent_blocked", "herdr agent get: not sent: the agent is at a dialog (agent_blocked: agent w1 is blocked and requires interactive input)", ExitCode.FAILURE),
    ("0.8.2 DELTA 6 agent_not_ready at start", 1, "", _err("agent_not_ready", "agent w1 is blocked during startup and is not ready for prompts"), e.HerdrAgentNotReady, "agent_not_ready", "herdr agent get: agent_not_ready: agent w1 is blocked during startup and is not ready for prompts", ExitCode.FAILURE),
    ("0.9 DELTA 8 workspace_group_close_required", 1, "", _err("workspace_group_close_required", "use --group"), e.HerdrGroupCloseRequired, "workspace_group_close_required", "herdr agent get: workspace_group_close_required: use --group", ExitCode.FAILURE),
    ("§11 other code", 1, "", _err("invalid_agent_timeout", "timeout must be > 3000"), e.HerdrCommandError, "invalid_agent_timeout", "herdr agent get: invalid_agent_timeout: timeout must be > 3000", ExitCode.FAILURE),
    ("multi-line message", 1, "", _err("worktree_create_failed", "Preparing worktree\nfatal: a branch named 'x' already exists\n"), e.HerdrWorktreeCreateFailed, "worktree_create_failed", "herdr agent get: worktree_create_failed: Preparing worktree / fatal: a branch named 'x' already exists", ExitCode.FAILURE),
    ("unparseable exit 1", 1, "", "thread 'main' panicked\n", e.HerdrProtocolError, None, "herdr agent get: unexpected exit 1: thread 'main' panicked", ExitCode.INTERNAL),
    ("json without error", 1, "", '{"id":"cli:agent:get"}\n', e.HerdrProtocolError, None, 'herdr agent get: unexpected exit 1: {"id":"cli:agent:get"}', ExitCode.INTERNAL),
    ("rust panic exit 101", 101, "", "thread 'main' panicked at src/cli.rs:1\n", e.HerdrProtocolError, None, "herdr agent get: unexpected exit 101: thread 'main' panicked at src/cli.rs:1", ExitCode.INTERNAL),
    ("exit 0, not JSON", 0, "hello\n", "", e.HerdrProtocolError, None, "herdr agent get: unexpected output: (root): Invalid JSON: expected value at line 1 column 1", ExitCode.INTERNAL),
    ("exit 0, wrong type", 0, sample("pane_get.json"), "", e.HerdrProtocolError, None, "herdr agent get: unexpected output: expected a AgentInfoResult result, got type 'pane_info'", ExitCode.INTERNAL),
    ("exit 0, missing field", 0, '{"id":"cli:agent:get","result":{"type":"agent_info","agent":{}}}\n', "", e.HerdrProtocolError, None, "herdr agent get: unexpected output: result.agent_info.agent.terminal_id: Field required (+7 more)", ExitCode.INTERNAL),
]


@pytest.mark.parametrize(
    ("rc", "stdout", "stderr", "cls", "code", "message", "exit_code"),
    [case[1:] for case in ERROR_CASES],
    ids=[case[0] for case in ERROR_CASES],
)
def test_failures_map_to_typed_one_line_errors_with_the_call_attached(
    rc: int, stdout: str, stderr: str, cls: type[e.HerdrFailure], code: str | None, message: str, exit_code: ExitCode
) -> None:
    runner = FakeRunner((rc, stdout, stderr))
    with pytest.raises(e.HerdrFailure) as info:
        make_cli(runner, retry=RetryPolicy(read_attempts=1)).agent_get("reviewer")
    err = info.value
    assert (type(err), err.code, str(err), err.exit_code) == (cls, code, message, exit_code)
    assert err.call == HerdrCall(("herdr", "agent", "get", "reviewer"), rc, stdout, stderr, 0.25)
    assert "\n" not in str(err)


def test_herdr_message_keeps_herdrs_own_text() -> None:
    runner = FakeRunner((1, "", _err("worktree_create_failed", "Preparing worktree\nfatal: exists\n")))
    with pytest.raises(e.HerdrWorktreeCreateFailed) as info:
        make_cli(runner).worktree_create(workspace="w1", branch="feat/x")
    assert info.value.herdr_message == "Preparing worktree\nfatal: exists\n"


def test_prompt_stalled_is_a_wait_expiry_the_engine_can_catch_together() -> None:
    assert issubclass(e.HerdrPromptStalled, e.HerdrWaitExpired) and issubclass(e.HerdrWaitExpired, e.HerdrCommandError)


def test_runner_timeout_becomes_herdr_timeout_with_partial_output() -> None:
    runner = FakeRunner(subprocess.TimeoutExpired(["herdr"], 75.0, output=b"partial", stderr=None))
    with pytest.raises(e.HerdrTimeout) as info:
        make_cli(runner).agent_wait("reviewer", timeout_ms=60000)
    assert (str(info.value), info.value.exit_code) == ("herdr agent wait: no answer within 75s; killed", ExitCode.HERDR_UNAVAILABLE)
    assert info.value.call == HerdrCall(("herdr", "agent", "wait", "reviewer", "--timeout", "60000"), None, "partial", "", 0.25)


def test_missing_binary_becomes_herdr_missing() -> None:
    runner = FakeRunner(FileNotFoundError(2, "No such file or directory"))
    with pytest.raises(e.HerdrMissing) as info:
        make_cli(runner).version()
    assert (str(info.value), info.value.exit_code, info.value.hint) == (
        "herdr --version: cannot execute 'herdr' (No such file or directory)",
        ExitCode.HERDR_UNAVAILABLE,
        "install herdr 0.7.5, 0.8.2, 0.9.1 or 0.9.5, or point orch at it with `orch --herdr PATH` or ORCH_HERDR",
    )


# --- per-call timeouts ---


@pytest.mark.parametrize(
    ("call", "stdout", "timeout"),
    [
        (lambda h: h.agent_get("r"), sample("agent_get.json"), 30.0),
        (lambda h: h.agent_prompt("r", "x"), sample("agent_prompt.json"), 30.0),
        (lambda h: h.agent_prompt("r", "x", wait=True, timeout_ms=60000), sample("agent_prompt.json"), 75.0),
        (lambda h: h.agent_wait("r", timeout_ms=5000), sample("agent_wait.json"), 20.0),
        (lambda h: h.agent_start("r", kind="codex", pane="w1:p2"), sample("agent_start.json"), 45.0),
        (lambda h: h.agent_start("r", kind="codex", pane="w1:p2", timeout_ms=120000), sample("agent_start.json"), 135.0),
        (lambda h: h.worktree_create(workspace="w1"), sample("worktree_create.json"), 180.0),
        (lambda h: h.worktree_open(workspace="w1", path="/p"), sample("worktree_open.json"), 180.0),
        (lambda h: h.worktree_remove("w3"), sample("worktree_remove.json"), 180.0),
    ],
)
def test_waits_get_herdrs_timeout_plus_a_margin(call: Callable[[HerdrCli], Any], stdout: str, timeout: float) -> None:
    runner = FakeRunner(ok(stdout))
    call(make_cli(runner))
    assert runner.timeouts == [timeout]


# --- retries ---


def test_reads_retry_while_the_server_is_unavailable_then_succeed() -> None:
    runner = FakeRunner((1, "", NO_SERVER), (1, "", _err("server_unavailable", "starting")), ok(sample("agent_list.json")))
    sleeps: list[float] = []
    agents = make_cli(runner, sleeps).agent_list()
    assert (len(agents), len(runner.argvs), sleeps) == (1, 3, [0.5, 0.5])


def test_reads_give_up_after_the_budget() -> None:
    runner = FakeRunner((1, "", NO_SERVER))
    sleeps: list[float] = []
    herdr = make_cli(runner, sleeps)
    with pytest.raises(e.HerdrUnavailable):
        herdr.pane_read("w1:p1")
    assert (len(runner.argvs), sleeps, len(herdr.calls)) == (3, [0.5, 0.5], 3)


def test_a_read_whose_herdr_process_was_killed_is_read_again() -> None:
    runner = FakeRunner((-9, "", ""), ok(sample("agent_list.json")))
    sleeps: list[float] = []
    agents = make_cli(runner, sleeps).agent_list()
    assert (len(agents), len(runner.argvs), sleeps) == (1, 2, [0.5])


@pytest.mark.parametrize("failure", [(-9, "", "")], ids=["killed"])
def test_a_lost_effect_call_is_never_repeated_by_the_boundary(failure: tuple[int, str, str]) -> None:
    runner = FakeRunner(failure)
    with pytest.raises(e.HerdrCallLost):
        make_cli(runner).pane_split("w1:p1", direction="right")
    assert len(runner.argvs) == 1


def test_reads_do_not_retry_a_command_error() -> None:
    runner = FakeRunner((1, "", sample("error_agent_not_found.json")))
    with pytest.raises(e.HerdrNotFound):
        make_cli(runner).agent_get("reviewer")
    assert len(runner.argvs) == 1


def test_agent_start_retries_a_busy_pane_then_starts() -> None:
    busy = (1, "", _err("agent_pane_busy", "pane w1:p2 is busy", "cli:agent:start"))
    runner = FakeRunner(busy, busy, ok(sample("agent_start.json")))
    sleeps: list[float] = []
    started = make_cli(runner, sleeps).agent_start("reviewer", kind="codex", pane="w1:p2")
    assert (started.agent.name, len(runner.argvs), sleeps) == ("reviewer", 3, [0.5, 0.5])


def test_agent_start_busy_wait_is_bounded() -> None:
    runner = FakeRunner((1, "", _err("agent_pane_busy", "busy", "cli:agent:start")))
    sleeps: list[float] = []
    with pytest.raises(e.HerdrPaneBusy):
        make_cli(runner, sleeps).agent_start("reviewer", kind="codex", pane="w1:p2")
    assert (len(runner.argvs), sum(sleeps)) == (21, 10.0)


def test_agent_start_does_not_retry_other_failures() -> None:
    runner = FakeRunner((1, "", NO_SERVER))
    with pytest.raises(e.HerdrUnavailable):
        make_cli(runner).agent_start("reviewer", kind="codex", pane="w1:p2")
    assert len(runner.argvs) == 1


@pytest.mark.parametrize(
    "call",
    [
        lambda h: h.workspace_create(label="x"),
        lambda h: h.workspace_close("w1"),
        lambda h: h.tab_create(workspace="w1"),
        lambda h: h.tab_close("w1:t1"),
        lambda h: h.pane_split("w1:p1", direction="right"),
        lambda h: h.pane_move_new_tab("w2:p1", workspace="w1"),
        lambda h: h.pane_close("w1:p1"),
        lambda h: h.pane_send_text("w1:p1", "x"),
        lambda h: h.pane_run("w1:p1", "x"),
        lambda h: h.worktree_create(workspace="w1"),
        lambda h: h.worktree_remove("w2"),
        lambda h: h.agent_prompt("r", "x"),
        lambda h: h.agent_prompt("r", "x", wait=True, timeout_ms=1000),
        lambda h: h.agent_send_keys("r", "Enter"),
        lambda h: h.agent_wait("r", timeout_ms=1000),
    ],
)
@pytest.mark.parametrize("failure", [(1, "", NO_SERVER), (1, "", _err("agent_pane_busy", "busy"))], ids=["unavailable", "busy"])
def test_effects_and_waits_are_never_retried(call: Callable[[HerdrCli], Any], failure: tuple[int, str, str]) -> None:
    runner = FakeRunner(failure)
    sleeps: list[float] = []
    with pytest.raises(e.HerdrFailure):
        call(make_cli(runner, sleeps))
    assert (len(runner.argvs), sleeps) == (1, [])


# --- local commands parsed from text ---


def test_integration_status_lines_become_typed_entries() -> None:
    runner = FakeRunner(ok(sample("integration_status.txt")))
    assert make_cli(runner).integration_status() == (
        m.IntegrationEntry(target="pi", state="not_installed", path="/home/me/.pi/agent/extensions/herdr-agent-state.ts"),
        m.IntegrationEntry(target="omp", state="outdated", installed_version=1, expected_version=2, path="/home/me/.omp/agent/extensions/herdr-agent-state.ts"),
        m.IntegrationEntry(target="claude", state="current", installed_version=3, path="/home/me/.claude/hooks/herdr-agent-state.sh"),
        m.IntegrationEntry(target="codex", state="current", legacy=True, path="/home/me/.codex/herdr-agent-state.sh"),
        m.IntegrationEntry(target="opencode", state="outdated", legacy=True, expected_version=2, path="/home/me/My Config (old)/opencode/herdr.ts"),
    )
    assert runner.argvs == [["herdr", "integration", "status"]]


def test_integration_status_keeps_states_it_does_not_know_with_their_line() -> None:
    # herdr 0.8.2 added `needs repair (vN)` (src/cli/integration.rs:50-56); a later herdr may add more: never a parse
    # failure, the line is kept so preflight can quote it for the kinds the plan uses.
    text = "opencode: needs repair (v10) (/h/.config/opencode/plugins/herdr-agent-state.js)\ngrok: half-installed (v2) (/h/.grok/hooks/x.sh)\npi: weird\n"
    assert make_cli(FakeRunner(ok(text))).integration_status() == (
        m.IntegrationEntry(target="opencode", state="needs_repair", installed_version=10, path="/h/.config/opencode/plugins/herdr-agent-state.js"),
        m.IntegrationEntry(target="grok", state="unknown", path="/h/.grok/hooks/x.sh", line="grok: half-installed (v2) (/h/.grok/hooks/x.sh)"),
        m.IntegrationEntry(target="pi", state="unknown", path="", line="pi: weird"),
    )


def test_api_schema_methods_come_from_the_request_variants(shared_dir: Path) -> None:
    schema = (shared_dir / "herdr-0.7.5" / "upstream" / "herdr-api.schema.json").read_text()
    runner = FakeRunner(ok(schema))
    methods = make_cli(runner).api_schema_methods()
    assert runner.argvs == [["herdr", "api", "schema", "--json"]]
    assert methods[:3] == ("ping", "server.stop", "server.live_handoff")
    assert {"agent.start", "agent.prompt", "agent.wait", "pane.move", "worktree.create"} <= set(methods)
    assert "agent.stop" not in methods


def test_api_schema_without_methods_is_a_protocol_error() -> None:
    with pytest.raises(e.HerdrProtocolError) as info:
        make_cli(FakeRunner(ok('{"schemas":{}}'))).api_schema_methods()
    assert str(info.value) == "herdr api schema: unexpected output: api schema has no request methods (KeyError)"


def test_version_line_must_name_herdr() -> None:
    with pytest.raises(e.HerdrProtocolError) as info:
        make_cli(FakeRunner(ok("tmux 3.4\n"))).version()
    assert str(info.value) == "herdr --version: unexpected output: unexpected version line 'tmux 3.4'"


def test_read_returns_raw_text_without_adding_or_stripping() -> None:
    raw = "line one\n\n  indented  \n› "
    assert make_cli(FakeRunner(ok(raw))).agent_read("reviewer") == raw


# --- recording ---


def test_every_process_is_recorded_and_echoed() -> None:
    echoed: list[HerdrCall] = []
    runner = FakeRunner((1, "", NO_SERVER), ok(sample("agent_list.json")))
    herdr = make_cli(runner, on_call=echoed.append)
    herdr.agent_list()
    assert herdr.calls == echoed == [
        HerdrCall(("herdr", "agent", "list"), 1, "", NO_SERVER, 0.25),
        HerdrCall(("herdr", "agent", "list"), 0, sample("agent_list.json"), "", 0.25),
    ]


def test_call_describe_renders_everything_for_the_log() -> None:
    call = HerdrCall(("herdr", "agent", "prompt", "reviewer", "two words"), 1, "", '{"id":"x"}\nsecond\n', 1.5)
    assert call.describe() == "\n".join(
        [
            "argv: herdr agent prompt reviewer 'two words'",
            "exit: 1",
            "seconds: 1.500",
            "stdout: (empty)",
            "stderr:",
            '  {"id":"x"}',
            "  second",
        ]
    )
    assert HerdrCall(("/opt/bin/herdr-sim", "--session", "acme", "pane", "list", "--workspace", "w1"), 0, "", "", 0).command == "herdr-sim pane list"
    assert HerdrCall(("herdr", "--version"), 0, "", "", 0).command == "herdr --version"


def test_echo_line_is_one_line_per_call() -> None:
    assert echo_line(HerdrCall(("herdr", "agent", "prompt", "r", "[hdr]\nbody"), 0, "", "", 0.25)) == "herdr> herdr agent prompt r '[hdr]\\nbody'  [exit 0, 0.25s]"
    assert echo_line(HerdrCall(("herdr", "agent", "wait", "r"), None, "", "", 75.0)) == "herdr> herdr agent wait r  [killed or not run, 75.00s]"


# --- through a real process ---

FAKE_HERDR = """\
#!{python}
import json, os, signal, sys
args = sys.argv[1:]
with open(os.environ["FAKE_HERDR_LOG"], "a") as log:
    log.write(json.dumps({{"argv": args, "stdin": sys.stdin.read(), "socket": os.environ.get("HERDR_SOCKET_PATH")}}) + "\\n")
if args == ["agent", "get", "reviewer"]:
    sys.stdout.write({agent_get!r})
elif args[:2] == ["agent", "wait"]:
    signal.pause()  # hang like a wait that never settles, until our timeout kills it
elif args[:2] == ["pane", "close"]:
    with open(os.environ["FAKE_HERDR_LOG"], "a") as log:
        log.write(json.dumps({{"pid": os.getpid(), "sid": os.getsid(0)}}) + "\\n")
    os.kill(os.getpid(), signal.SIGKILL)  # dies of a signal before answering
elif args[:2] == ["pane", "send-keys"]:
    # Interrupt the caller in the middle of this call, then finish only once its handler has run: opening the
    # release FIFO blocks until the handler opens its other end, and reading ends when the handler closes it.
    os.kill(int(os.environ["FAKE_HERDR_CALLER"]), signal.SIGINT)
    fifo = os.open(os.environ["FAKE_HERDR_RELEASE"], os.O_RDONLY)
    while os.read(fifo, 64):
        pass
    os.close(fifo)
    with open(os.environ["FAKE_HERDR_LOG"], "a") as log:
        log.write(json.dumps({{"finished": True}}) + "\\n")
else:
    sys.stderr.write({no_server!r})
    sys.exit(1)
"""


@pytest.fixture
def fake_herdr(tmp_path: Path) -> tuple[Path, Path]:
    binary = tmp_path / "bin" / "herdr"
    binary.parent.mkdir()
    binary.write_text(FAKE_HERDR.format(python=sys.executable, agent_get=sample("agent_get.json"), no_server=NO_SERVER))
    binary.chmod(0o755)
    return binary, tmp_path / "calls.jsonl"


def _real_cli(binary: Path | str, log: Path, extra_env: dict[str, str] | None = None, **kwargs: Any) -> HerdrCli:
    env = {"FAKE_HERDR_LOG": str(log), "HERDR_SOCKET_PATH": "/tmp/orch-test.sock", **(extra_env or {})}
    return HerdrCli(str(binary), env=env, sleep=lambda _: None, **kwargs)


def test_real_process_success_with_env_overlay_and_closed_stdin(fake_herdr: tuple[Path, Path]) -> None:
    binary, log = fake_herdr
    assert _real_cli(binary, log).agent_get("reviewer") == result_of("agent_get.json").agent
    assert [json.loads(line) for line in log.read_text().splitlines()] == [{"argv": ["agent", "get", "reviewer"], "stdin": "", "socket": "/tmp/orch-test.sock"}]


def test_real_process_error_is_mapped(fake_herdr: tuple[Path, Path]) -> None:
    binary, log = fake_herdr
    with pytest.raises(e.HerdrUnavailable) as info:
        _real_cli(binary, log, retry=RetryPolicy(read_attempts=1)).pane_list()
    assert (str(info.value), info.value.call and info.value.call.stderr) == ("herdr pane list: herdr server is not running", NO_SERVER)


def test_real_process_is_killed_at_our_timeout(fake_herdr: tuple[Path, Path]) -> None:
    binary, log = fake_herdr
    herdr = _real_cli(binary, log, wait_margin_s=0.3)  # the real margin is 15 s; shrunk to keep the test fast
    with pytest.raises(e.HerdrTimeout) as info:
        herdr.agent_wait("reviewer", timeout_ms=1)
    assert str(info.value) == "herdr agent wait: no answer within 0.301s; killed"
    assert (herdr.calls[0].argv[1:], herdr.calls[0].returncode) == (("agent", "wait", "reviewer", "--timeout", "1"), None)
    assert herdr.calls[0].seconds >= 0.3


def test_real_process_runs_in_a_session_of_its_own_and_its_death_by_signal_is_an_unknown_outcome(fake_herdr: tuple[Path, Path]) -> None:
    binary, log = fake_herdr
    with pytest.raises(e.HerdrCallLost) as info:
        _real_cli(binary, log).pane_close("w1:p2")
    assert isinstance(info.value, e.HerdrTimeout)  # engine.once keeps the effect in flight for read-back
    assert str(info.value) == "herdr pane close: the herdr process died of signal 9; its outcome is unknown"
    child = json.loads(log.read_text().splitlines()[-1])
    # A session leader: a terminal's Ctrl-C (sent to the foreground process group) never reaches it.
    assert child["sid"] == child["pid"] != os.getsid(0)


def test_an_interrupt_during_a_real_call_waits_for_the_call_to_finish(fake_herdr: tuple[Path, Path], tmp_path: Path) -> None:
    binary, log = fake_herdr
    release = tmp_path / "release"
    os.mkfifo(release)
    seen: list[int] = []

    def interrupt(signum: int, frame: Any) -> None:
        seen.append(signum)
        os.close(os.open(release, os.O_WRONLY))  # the fake herdr finishes its call only after orch has seen the interrupt
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGINT, interrupt)
    cli = _real_cli(binary, log, {"FAKE_HERDR_CALLER": str(os.getpid()), "FAKE_HERDR_RELEASE": str(release)})
    try:
        with pytest.raises(KeyboardInterrupt):
            cli.pane_send_keys("w1:p2", "Enter")
    finally:
        signal.signal(signal.SIGINT, previous)
    assert seen == [signal.SIGINT]
    # herdr finished its call (orch stops between calls, never inside one).
    assert json.loads(log.read_text().splitlines()[-1]) == {"finished": True}


def test_real_missing_and_unexecutable_binaries(tmp_path: Path) -> None:
    not_exec = tmp_path / "herdr"
    not_exec.write_text("#!/bin/sh\n")
    for binary, expected in [
        (tmp_path / "nope" / "herdr", "herdr --version: cannot execute '{}' (No such file or directory)"),
        (not_exec, "herdr --version: cannot execute '{}' (Permission denied)"),
    ]:
        with pytest.raises(e.HerdrMissing) as info:
            HerdrCli(str(binary)).version()
        assert str(info.value) == expected.format(binary)
    assert os.access(not_exec, os.X_OK) is False


def test_082_row8_a_read_outlasts_herdrs_alternate_screen_scroll() -> None:
    """herdr 0.8.x collects an idle alternate-screen agent's history by scrolling it: up to 15 s + 5 s per read
    (../shared/herdr-0.8.2/DELTA.md row 8). orch's reads get its default timeout, which is longer."""
    runner = FakeRunner(ok("text\n"))
    cli = make_cli(runner)
    cli.pane_read("w1:p2", source="recent", lines=40)
    cli.agent_read("r", source="recent-unwrapped", lines=60)
    assert runner.timeouts == [30.0, 30.0] and min(runner.timeouts) > 15 + 5


@pytest.mark.parametrize("server, delay", [
    ("0.7.5", 0.0), ("0.8.0", 0.3), ("0.8.2", 0.3), ("0.9.0", 0.0), ("0.9.1", 0.0), ("1.0.0", 0.0), ("nightly", 0.3),
])  # fmt: skip
def test_features_say_how_long_a_prompts_enter_may_follow_its_answer(server: str, delay: float) -> None:
    # 0.8.x writes Enter 300 ms after answering (#1878); 0.9 before it; an unparsable version is waited out to be safe.
    status = sample("status.json").replace('"running":true,"version":"0.7.5"', f'"running":true,"version":"{server}"')
    assert make_cli(FakeRunner(ok(status))).features().prompt_enter_delay_s == delay


def test_a_herdr_child_never_sees_the_terminal_signals_of_orchs_group() -> None:
    # The child joins its own session only between fork and exec; until then a Ctrl-C to orch's process group
    # could kill it before herdr ran. The spawning thread blocks those signals, so the child starts with them blocked.
    from orchestrator.herdr import run_process

    done = run_process([sys.executable, "-c", "print(open('/proc/self/status').read())"], env=dict(os.environ), timeout=30)
    blocked = int(next(line for line in done.stdout.splitlines() if line.startswith("SigBlk:")).split()[1], 16)
    assert [bool(blocked & (1 << (sig - 1))) for sig in (signal.SIGINT, signal.SIGQUIT, signal.SIGTSTP, signal.SIGHUP)] == [True] * 4
    assert signal.SIGINT not in signal.pthread_sigmask(signal.SIG_BLOCK, set()), "the caller's own mask is restored"
    assert os.getsid(0) != int(next(line for line in done.stdout.splitlines() if line.startswith("NSsid:")).split()[1])


def test_a_machine_that_cannot_be_reached_is_host_unreachable_and_a_remote_servers_own_error_is_typed_as_ever() -> None:
    dropped = "error: machine 'buildbox' (session acme): ssh: Connection to the remote host closed by remote host\n"
    refused = _err("pane_not_found", "pane w1:p9 not found", "cli:pane:close")
    runner = FakeRunner((1, "", dropped), (1, "", refused))
    cli = make_cli(runner, machine="buildbox")

    with pytest.raises(e.HostUnreachable) as lost:
        cli.worktree_create(cwd="/srv/acme/widgets", branch="feat/x", path="/srv/acme/widgets.worktrees/widgets-feat-x")
    with pytest.raises(e.HerdrNotFound):
        cli.pane_close("w1:p9")

    # A create that lost its answer is an unknown outcome (Engine.once settles it by read-back), never tried again here.
    assert [argv[:4] for argv in runner.argvs] == [["herdr", "--machine", "buildbox", "worktree"], ["herdr", "--machine", "buildbox", "pane"]]
    assert (lost.value.message, lost.value.hint, lost.value.exit_code) == (
        "herdr --machine buildbox worktree create: machine 'buildbox' (session acme): ssh: Connection to the remote host closed by remote host",
        "`herdr machine status buildbox` says whether herdr can reach it",
        3,
    )


def test_another_hosts_features_come_from_its_server_through_the_one_status_form_herdr_forwards() -> None:
    server = json.dumps({"status": "running", "running": True, "version": "0.9.5", "protocol": 22, "compatible": True, "socket": "/r/herdr.sock"})
    runner = FakeRunner(ok(server))
    cli = make_cli(runner, machine="buildbox")

    # `status --json` is not forwarded (herdr exits 2 for it): the resume commands and --trust-repository depend on this.
    assert (cli.features().version, cli.features().resume_commands, cli.features().trust_repository) == ("0.9.5", True, True)
    assert runner.argvs == [["herdr", "--machine", "buildbox", "status", "server", "--json"]]
