"""Every argv form orch sends to herdr, checked against each release's rules (0.7.5, 0.8.2, 0.9.x) and the simulator.

The table lists each form the engine actually uses (grep `herdr.<method>(` in orchestrator/). Each row names the
herdr source that accepts it, at tag v0.7.5 (`git -C /work/.mirror/herdrdev+herdr/repo show v0.7.5:<file>`).
0.8.2 and 0.9.x are checked against their CLI reference (`../shared/herdr-0.8.2/upstream/cli-reference.mdx`,
`../shared/herdr-0.9.1/upstream/cli-reference.mdx`): the synopsis line of the command must name every flag the form
sends (the line is cited in the failure), with the source-only exceptions in VERSION_EXCEPTIONS.
Checks per row: HerdrCli builds exactly that argv (runner seam); the simulator's parser accepts it under every
profile (it reaches the server connection, i.e. no usage error); and, for the forms herdr rejects, both orch and the
simulator refuse.
"""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from herdr_sim import cli as sim
from orchestrator import errors as e
from orchestrator.herdr import HerdrCli
from orchestrator.herdr_models import AgentSession

DATA = Path(__file__).parent / "data" / "herdr"
ENVELOPE = "[herdr-orchestration run=r1 task=fix from=controller kind=answer reply-to=w1:p1]\nUse --help; it's \"fine\"."


class Seam:
    """The runner seam: records the argv and answers with one canned stdout."""

    def __init__(self, stdout: str) -> None:
        self.stdout = stdout
        self.argvs: list[list[str]] = []

    def __call__(self, argv: Sequence[str], *, env: Mapping[str, str], timeout: float) -> subprocess.CompletedProcess[str]:
        self.argvs.append(list(argv))
        return subprocess.CompletedProcess(list(argv), 0, self.stdout, "")


def out(name: str) -> str:
    return (DATA / name).read_text()


# (form, call as the engine makes it, argv after `herdr`, herdr v0.7.5 source that accepts it, canned stdout)
FORMS: list[tuple[str, Callable[[HerdrCli], Any], list[str], str, str]] = [
    ("--version", lambda h: h.version(), ["--version"], "src/main.rs:647-650", "herdr 0.7.5\n"),
    ("--help", lambda h: h.help_text(), ["--help"], "src/main.rs:535-645 (src/cli/spec.rs:71-73 leaves index 1 alone)", "herdr\n"),
    ("status --json", lambda h: h.status(), ["status", "--json"], "src/cli/status.rs:33-36", out("status.json")),
    ("session list --json", lambda h: h.session_list(), ["session", "list", "--json"], "src/cli.rs:433-449, 869-878", out("session_list.json")),
    ("integration status", lambda h: h.integration_status(), ["integration", "status"], "src/cli/integration.rs:24-32", out("integration_status.txt")),
    ("api schema --json", lambda h: h.api_schema_methods(), ["api", "schema", "--json"], "src/cli/api.rs:25-32",
     '{"schemas":{"request":{"oneOf":[{"properties":{"method":{"const":"ping"}}}]}}}'),
    ("workspace list", lambda h: h.workspace_list(), ["workspace", "list"], "src/cli/workspace.rs:32-39", out("workspace_list.json")),
    ("workspace create --cwd --label --no-focus", lambda h: h.workspace_create(cwd="/src/acme/widgets", label="widgets"),
     ["workspace", "create", "--cwd", "/src/acme/widgets", "--label", "widgets", "--no-focus"], "src/cli/workspace.rs:41-102", out("workspace_create.json")),
    ("workspace create --cwd --no-focus", lambda h: h.workspace_create(cwd="/src/acme/widgets"),
     ["workspace", "create", "--cwd", "/src/acme/widgets", "--no-focus"], "src/cli/workspace.rs:41-102", out("workspace_create.json")),
    ("workspace close", lambda h: h.workspace_close("w3"), ["workspace", "close", "w3"], "src/cli/workspace.rs:227-238", out("workspace_close.json")),
    ("tab list --workspace", lambda h: h.tab_list(workspace="w1"), ["tab", "list", "--workspace", "w1"], "src/cli/tab.rs:29-51", out("tab_list.json")),
    ("tab rename", lambda h: h.tab_rename("w1:t1", "project feat x"), ["tab", "rename", "w1:t1", "project feat x"], "src/cli/tab.rs:152-162", out("tab_rename.json")),
    ("pane current --current", lambda h: h.pane_current(), ["pane", "current", "--current"], "src/cli/pane.rs:98-139", out("pane_current.json")),
    ("pane list", lambda h: h.pane_list(), ["pane", "list"], "src/cli/pane.rs:53-78", out("pane_list.json")),
    ("pane list --workspace", lambda h: h.pane_list(workspace="w3"), ["pane", "list", "--workspace", "w3"], "src/cli/pane.rs:53-78", out("pane_list.json")),
    ("pane get", lambda h: h.pane_get("w1:p2"), ["pane", "get", "w1:p2"], "src/cli/pane.rs:80-96", out("pane_get.json")),
    ("pane layout --pane", lambda h: h.pane_layout("w1:p1"), ["pane", "layout", "--pane", "w1:p1"], "src/cli/pane.rs:141-154, 225-245", out("pane_layout.json")),
    ("pane split --pane --direction --cwd --no-focus", lambda h: h.pane_split("w1:p1", direction="down", cwd="/wt/a"),
     ["pane", "split", "--pane", "w1:p1", "--direction", "down", "--cwd", "/wt/a", "--no-focus"], "src/cli/pane.rs:512-623, src/cli.rs:800-808", out("pane_split.json")),
    ("pane move --new-tab --workspace --label --no-focus", lambda h: h.pane_move_new_tab("w3:p1", workspace="w1", label="widgets feat-a"),
     ["pane", "move", "w3:p1", "--new-tab", "--workspace", "w1", "--label", "widgets feat-a", "--no-focus"], "src/cli/pane.rs:649-791", out("pane_move_new_tab.json")),
    ("pane read --source recent --lines", lambda h: h.pane_read("w1:p2", source="recent", lines=40),
     ["pane", "read", "w1:p2", "--source", "recent", "--lines", "40"], "src/cli/pane.rs:443-510, src/cli.rs:810-820, 857-861", out("pane_read.txt")),
    ("pane send-text", lambda h: h.pane_send_text("w1:p2", "/exit"), ["pane", "send-text", "w1:p2", "/exit"], "src/cli/pane.rs:900-909, src/cli.rs:729-741 (prints nothing)", ""),
    ("pane send-keys Enter", lambda h: h.pane_send_keys("w1:p2", "Enter"), ["pane", "send-keys", "w1:p2", "Enter"],
     "src/cli/pane.rs:911-920, src/config/keybinds.rs:1206-1262 (enter)", ""),
    ("pane close", lambda h: h.pane_close("w1:p2"), ["pane", "close", "w1:p2"], "src/cli/pane.rs:887-898", out("pane_close.json")),
    ("worktree list --workspace --json", lambda h: h.worktree_list(workspace="w1"), ["worktree", "list", "--workspace", "w1", "--json"],
     "src/cli/worktree.rs:27-63", out("worktree_list.json")),
    ("worktree list --cwd --json", lambda h: h.worktree_list(cwd="/src/acme/widgets"), ["worktree", "list", "--cwd", "/src/acme/widgets", "--json"],
     "src/cli/worktree.rs:27-63", out("worktree_list.json")),
    ("worktree create --workspace --branch --base --path --label --no-focus --json",
     lambda h: h.worktree_create(workspace="w1", branch="feat-a", base="0123abc", path="/wt/feat-a", label="widgets feat-a"),
     ["worktree", "create", "--workspace", "w1", "--branch", "feat-a", "--base", "0123abc", "--path", "/wt/feat-a", "--label", "widgets feat-a", "--no-focus", "--json"],
     "src/cli/worktree.rs:65-156", out("worktree_create.json")),
    ("worktree open --workspace --path --label --no-focus --json", lambda h: h.worktree_open(workspace="w1", path="/wt/feat-a", label="widgets feat-a"),
     ["worktree", "open", "--workspace", "w1", "--path", "/wt/feat-a", "--label", "widgets feat-a", "--no-focus", "--json"], "src/cli/worktree.rs:158-245", out("worktree_open.json")),
    ("worktree remove --workspace --json", lambda h: h.worktree_remove("w3"), ["worktree", "remove", "--workspace", "w3", "--json"], "src/cli/worktree.rs:247-283", out("worktree_remove.json")),
    ("agent list", lambda h: h.agent_list(), ["agent", "list"], "src/cli/agent.rs:377-387", out("agent_list.json")),
    ("agent get", lambda h: h.agent_get("feat-a"), ["agent", "get", "feat-a"], "src/cli/agent.rs:389-405", out("agent_get.json")),
    ("agent start --kind --pane --timeout", lambda h: h.agent_start("feat-a", kind="codex", pane="w1:p2", timeout_ms=30000),
     ["agent", "start", "feat-a", "--kind", "codex", "--pane", "w1:p2", "--timeout", "30000"], "src/cli/agent.rs:272-375, src/detect/mod.rs:167-200 (kinds)", out("agent_start.json")),
    ("agent start … -- args", lambda h: h.agent_start("feat-a", kind="claude", pane="w1:p2", timeout_ms=30000, args=("--model", "x", "--session", "s")),
     ["agent", "start", "feat-a", "--kind", "claude", "--pane", "w1:p2", "--timeout", "30000", "--", "--model", "x", "--session", "s"],
     "src/cli/agent.rs:277-345; src/session.rs:58-61 stops at --", out("agent_start.json")),
    ("agent prompt", lambda h: h.agent_prompt("feat-a", ENVELOPE), ["agent", "prompt", "feat-a", ENVELOPE], "src/cli/agent.rs:638-708 (text is args[1], any shape)", out("agent_prompt.json")),
    ("agent prompt --wait --until… --timeout", lambda h: h.agent_prompt("feat-a", ENVELOPE, wait=True, until=("working", "idle", "done", "blocked"), timeout_ms=120000),
     ["agent", "prompt", "feat-a", ENVELOPE, "--wait", "--until", "working", "--until", "idle", "--until", "done", "--until", "blocked", "--timeout", "120000"],
     "src/cli/agent.rs:649-698, src/cli.rs:832-843", out("agent_prompt.json")),
    ("agent wait --until --timeout", lambda h: h.agent_wait("feat-a", until=("working",), timeout_ms=5000),
     ["agent", "wait", "feat-a", "--until", "working", "--timeout", "5000"], "src/cli/agent.rs:445-499", out("agent_wait.json")),
    ("agent read --source recent-unwrapped --lines", lambda h: h.agent_read("feat-a", source="recent-unwrapped", lines=60),
     ["agent", "read", "feat-a", "--source", "recent-unwrapped", "--lines", "60"], "src/cli/agent.rs:725-787, src/cli.rs:810-820", out("pane_read.txt")),
    ("agent read --source visible", lambda h: h.agent_read("feat-a", source="visible"), ["agent", "read", "feat-a", "--source", "visible"],
     "src/cli/agent.rs:725-787", out("pane_read.txt")),
    ("agent send-keys shift+tab", lambda h: h.agent_send_keys("feat-a", "shift+tab"), ["agent", "send-keys", "feat-a", "shift+tab"],
     "src/cli/agent.rs:710-723, src/config/keybinds.rs:1206-1262 (shift+tab = BackTab)", out("agent_send_keys.json")),
    ("agent explain --json", lambda h: h.agent_explain("feat-a"), ["agent", "explain", "feat-a", "--json"], "src/cli/agent.rs:38-153", out("agent_explain.json")),
]

# herdr answers these without a server (main.rs / local CLI commands); every other form needs the socket.
LOCAL = {"--version", "--help", "status --json", "session list --json", "integration status", "api schema --json"}
NO_SERVER = 'Error: Os { code: 2, kind: NotFound, message: "No such file or directory" }\n'
PROFILES = ("0.7.5", "0.8.2", "0.9", "0.9.5")
DOCS = {"0.8.2": "herdr-0.8.2/upstream/cli-reference.mdx", "0.9": "herdr-0.9.1/upstream/cli-reference.mdx"}
# Flags the docs do not show but the source accepts, per release: (form, flag) -> why it still parses there.
VERSION_EXCEPTIONS: dict[tuple[str, str], dict[str, str]] = {
    **{(form, "--json"): {
        "0.8.2": "hidden no-op: src/cli/worktree.rs:51,134,218,267 at v0.8.2",
        "0.9": "not in the 0.9 docs and not verifiable in the 0.9 source (../herdr-0.9.1/DELTA.md row 7); the simulator keeps 0.8.2's hidden no-op",
    } for form in ("worktree list --workspace --json", "worktree list --cwd --json",
                   "worktree create --workspace --branch --base --path --label --no-focus --json",
                   "worktree open --workspace --path --label --no-focus --json", "worktree remove --workspace --json")},
    **{("status --json", "--json"): {v: "`herdr status` prints JSON with --json (cli-reference \"Status\"; src/cli/status.rs)" for v in ("0.8.2", "0.9")}},
}


def _command_path(argv: list[str]) -> str:
    """The words naming the command: `--version`, `status`, `pane read`, `agent start`."""
    if argv[0].startswith("-"):
        return argv[0]
    return argv[0] if argv[0] == "status" else " ".join(argv[:2])


def _flags(argv: list[str]) -> list[str]:
    head = argv[: argv.index("--")] if "--" in argv else argv
    # A prompt text or label is one argv word; only words orch passes as options count.
    return [w for w in head[1:] if w.startswith("--") and w != ENVELOPE]


def _synopses(doc: str, path: str) -> list[tuple[int, str]]:
    prefix = f"herdr {path}"
    return [(n, line) for n, line in enumerate(doc.splitlines(), 1) if line == prefix or line.startswith(prefix + " ")]


@pytest.mark.parametrize("version", list(DOCS))
@pytest.mark.parametrize(("form", "argv"), [(f[0], f[2]) for f in FORMS if f[0] != "--help"], ids=[f[0] for f in FORMS if f[0] != "--help"])
def test_every_form_is_in_each_releases_cli_reference(form: str, argv: list[str], version: str, shared_dir: Path) -> None:
    doc_path = DOCS[version]
    lines = _synopses((shared_dir / doc_path).read_text(), _command_path(argv))
    assert lines, f"{form}: no `herdr {_command_path(argv)}` synopsis in {doc_path}"
    for flag in _flags(argv):
        where = [f"{doc_path}:{n}" for n, line in lines if flag in re.split(r"[\s|\[\]()]+", line)]
        if not where:
            assert version in VERSION_EXCEPTIONS.get((form, flag), {}), f"{form}: {flag} is in none of {[f'{doc_path}:{n}' for n, _ in lines]}"


def _no_server(version: str, home: Path, rid: str) -> str:
    if version == "0.7.5":
        return NO_SERVER
    # v0.8.2 src/cli/server_not_running.rs:27-40: JSON with the request id, exit 1.
    message = f"no herdr server is running at {home / 'sim' / 'herdr.sock'}; run `herdr` to start or attach it"
    return json.dumps({"id": rid, "error": {"code": "server_not_running", "message": message}}, separators=(",", ":")) + "\n"


def _rid(argv: list[str]) -> str:
    if argv[:2] in (["pane", "send-text"], ["pane", "send-keys"]):
        return "cli:request"  # quiet commands (src/cli.rs:729-741)
    return f"cli:{argv[0]}:{argv[1]}"


@pytest.mark.parametrize(("form", "call", "argv", "source", "stdout"), FORMS, ids=[f[0] for f in FORMS])
def test_orch_builds_exactly_the_form_herdr_accepts(form: str, call: Callable[[HerdrCli], Any], argv: list[str], source: str, stdout: str) -> None:
    seam = Seam(stdout)
    call(HerdrCli("herdr", runner=seam, sleep=lambda _s: None))
    assert seam.argvs == [["herdr", *argv]], f"{form}: herdr accepts {argv} ({source})"


@pytest.fixture
def no_server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A simulator home with no server running, so a parsed request stops at the socket (herdr 0.7.5 unless a test says)."""
    for name in ("HERDR_SOCKET_PATH", "HERDR_SESSION", "HERDR_PANE_ID", "HERDR_SIM_INTEGRATIONS"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HERDR_SIM_HOME", str(tmp_path / "sim"))
    monkeypatch.setenv("HERDR_SIM_VERSION", "0.7.5")
    return tmp_path


@pytest.mark.parametrize("version", PROFILES)
@pytest.mark.parametrize(("form", "argv"), [(f[0], f[2]) for f in FORMS if f[0] not in LOCAL], ids=[f[0] for f in FORMS if f[0] not in LOCAL])
def test_simulator_parses_every_form_and_stops_only_at_the_missing_server(
    form: str, argv: list[str], version: str, no_server: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HERDR_SIM_VERSION", version)
    code = sim.main(argv)
    captured = capsys.readouterr()
    assert (code, captured.out, captured.err) == (1, "", _no_server(version, no_server, _rid(argv))), form


@pytest.mark.parametrize("version", PROFILES)
@pytest.mark.parametrize("form", sorted(LOCAL - {"--help"}))
def test_simulator_answers_the_local_forms_without_a_server(
    form: str, version: str, no_server: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HERDR_SIM_VERSION", version)
    argv = next(f[2] for f in FORMS if f[0] == form)
    code = sim.main(argv)
    captured = capsys.readouterr()
    assert (code, captured.err) == (0, ""), form
    assert captured.out


# Forms herdr rejects (or misreads) and the exit code and stderr it gives; the simulator must agree.
REJECTED: list[tuple[list[str], int, str, str]] = [
    (["agent", "prompt", "a", "x", "--wait", "--timeout", "-1"], 2, "invalid value for --timeout: -1\n", "src/cli/agent.rs:674-683, 811-816"),
    (["agent", "wait", "a", "--timeout", "５０００"], 2, "invalid value for --timeout: ５０００\n", "src/cli.rs:863-867 (Rust u64 grammar is ASCII)"),
    (["agent", "start", "n", "--kind", "codex", "--pane", "w1:p1", "--timeout", "1_000"], 2, "invalid value for --timeout: 1_000\n", "src/cli/agent.rs:303-312"),
    (["pane", "read", "w1:p1", "--lines", "4294967296"], 1, 'Error: Custom { kind: Other, error: "invalid value for --lines: 4294967296" }\n',
     "src/cli.rs:857-861 (u32), io::Error escapes main"),
    (["pane", "read", "--source", "recent", "w1:p1"], 2, "unknown option: recent\n", "src/cli/pane.rs:443-496 (target is the first word)"),
    (["agent", "read", "a", "--raw"], 2, "unknown option: --raw\n", "src/cli/agent.rs:737-773 (agent read has no --raw)"),
    (["pane", "split", "--pane", "w1:p1", "--direction", "down", "--ratio", "nan"], 2, "invalid ratio: nan\n", "src/cli/pane.rs:567-579"),
    (["pane", "split", "--pane", "w1:p1", "--direction", "down", "--ratio", "1_0"], 2, "invalid ratio: 1_0\n", "src/cli/pane.rs:567-579 (Rust f32 grammar)"),
    (["worktree", "remove", "--workspace", "w3", "--label", "x"], 2, "unknown option: --label\n", "src/cli/worktree.rs:247-272"),
    (["worktree", "list", "--branch", "b", "--json"], 2, "unknown option: --branch\n", "src/cli/worktree.rs:27-56"),
    (["worktree", "create", "--workspace", "w1", "--force"], 2, "unknown option: --force\n", "src/cli/worktree.rs:65-138"),
    (["agent", "explain", "a", "--format", "yaml"], 2, "invalid --format: yaml (expected text or json)\n", "src/cli/agent.rs:68-82"),
    (["agent", "prompt", "a", "--remote=host"], 2, "error: --remote can only be used with the default launch command\nrun 'herdr --help' for usage\n",
     "src/remote.rs:74-81, src/main.rs:472-485"),
    (["agent", "prompt", "a", "--handoff", "--wait", "--timeout", "5"], 2, "unknown option: --handoff\n",
     "src/remote.rs:58-62, 116-118 (--handoff moves to the end: the text becomes --wait)"),
    (["tab", "rename", "w1:t1", "--remote-keybindings", "x"], 2, "error: --remote-keybindings requires --remote\nrun 'herdr --help' for usage\n",
     "src/remote.rs:82-92, 113-115"),
    (["pane", "list", "--session"], 2, "error: missing value for --session\nrun 'herdr --help' for usage\n", "src/session.rs:62-65, src/main.rs:455-461"),
]


@pytest.mark.parametrize(("argv", "code", "stderr", "source"), REJECTED, ids=[" ".join(r[0]) for r in REJECTED])
def test_simulator_rejects_what_herdr_rejects(argv: list[str], code: int, stderr: str, source: str, no_server: Path, capsys: pytest.CaptureFixture[str]) -> None:
    result = sim.main(argv)
    captured = capsys.readouterr()
    assert (result, captured.out, captured.err) == (code, "", stderr), source


@pytest.mark.parametrize(
    ("flag", "stderr"),
    [(["--timeout", "10"], "--timeout requires --wait\n"), (["--until", "idle"], "--until requires --wait\n")],
    ids=["--timeout", "--until"],
)
def test_simulator_rejects_wait_options_without_wait(flag: list[str], stderr: str, no_server: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """src/cli/agent.rs:691-698: exit 2 with herdr's own text on stderr."""
    result = sim.main(["agent", "prompt", "a", "x", *flag])
    captured = capsys.readouterr()
    assert (result, captured.out, captured.err) == (2, "", stderr)


def test_simulator_keeps_session_words_after_the_separator(no_server: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """src/session.rs:58-61: `--session` after `--` belongs to the agent, so `agent start` still parses and needs the server."""
    code = sim.main(["agent", "start", "n", "--kind", "codex", "--pane", "w1:p1", "--", "--session", "s"])
    assert (code, capsys.readouterr().err) == (1, NO_SERVER)


def test_simulator_takes_the_last_session_flag(no_server: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """src/session.rs:54-81: every `--session` is stripped and the last one wins; an invalid last name is refused."""
    code = sim.main(["--session", "good", "pane", "list", "--session=bad/name"])
    assert (code, capsys.readouterr().err) == (2, "error: invalid session name: bad/name\nrun 'herdr --help' for usage\n")


def ok_cli() -> HerdrCli:
    return HerdrCli("herdr", runner=Seam(""), sleep=lambda _s: None)


# Words orch must never send: herdr would strip, move or reinterpret them before the subcommand parser runs.
REFUSED: list[tuple[Callable[[HerdrCli], Any], str]] = [
    (lambda h: h.agent_prompt("a", "--remote=host"), "herdr would take the argv word '--remote=host' as a remote-launch flag"),
    (lambda h: h.agent_prompt("a", "--handoff"), "herdr would take the argv word '--handoff' as a remote-launch flag"),
    (lambda h: h.tab_rename("w1:t1", "--remote-keybindings"), "herdr would take the argv word '--remote-keybindings' as a remote-launch flag"),
    (lambda h: h.pane_send_text("w1:p1", "--remote"), "herdr would take the argv word '--remote' as a remote-launch flag"),
    (lambda h: h.agent_get("-h"), "herdr would print help instead of running: '-h' follows 'agent get'"),
    (lambda h: h.pane_read("--help"), "herdr would print help instead of running: '--help' follows 'pane read'"),
    (lambda h: h.agent_wait("a", timeout_ms=-1), "--timeout must be an integer from 0 to 18446744073709551615, not -1 (herdr rejects it)"),
    (lambda h: h.agent_read("a", lines=2**32), "--lines must be an integer from 0 to 4294967295, not 4294967296 (herdr rejects it)"),
    (lambda h: h.pane_split("w1:p1", direction="down", ratio=float("nan")), "--ratio must be a finite number, not nan (herdr rejects it)"),
]


@pytest.mark.parametrize(("call", "message"), REFUSED, ids=[r[1] for r in REFUSED])
def test_orch_refuses_words_herdr_would_misread(call: Callable[[HerdrCli], Any], message: str) -> None:
    cli = ok_cli()
    with pytest.raises(ValueError) as raised:
        call(cli)
    assert str(raised.value) == message
    assert cli.calls == []


def test_help_words_later_in_the_argv_are_plain_text() -> None:
    """src/cli/spec.rs:91-93: help only when it directly follows the command path, so a prompt may say --help."""
    seam = Seam(out("agent_prompt.json"))
    HerdrCli("herdr", runner=seam).agent_prompt("feat-a", "--help")
    assert seam.argvs == [["herdr", "agent", "prompt", "feat-a", "--help"]]


# --- 0.9 DELTA rows orch meets only by what it never sends (../shared/herdr-0.9.1/DELTA.md) -------------------------
# tests/herdr_sim/test_versions.py shows the simulator's side of each row; these show orch's.

COMMANDS = {"status", "session", "integration", "api", "workspace", "tab", "pane", "worktree", "agent"}


def test_09_row9_orch_polls_and_never_subscribes_to_events() -> None:
    """0.9's event subscriptions start with live events only ("subscribe before the snapshot"): orch polls the CLI,
    so no form it sends subscribes or waits on events."""
    assert [f[0] for f in FORMS if "events" in f[2] or any("subscribe" in w for w in f[2])] == []


def test_09_row10_orch_never_launches_herdr() -> None:
    """0.9 removed `--no-session`; orch never sends it, nor any other launch form (plain `herdr` starts the TUI):
    every form is `--version`, `--help` or a command."""
    assert [f[0] for f in FORMS if "--no-session" in f[2] or not (f[2] in (["--version"], ["--help"]) or f[2][0] in COMMANDS)] == []


def test_09_row13_every_form_that_creates_or_moves_leaves_every_clients_view_alone() -> None:
    """0.9 clients view workspaces and tabs independently; orch never moves any client's focus: every form that
    creates or moves a pane, tab or workspace says --no-focus."""
    creating = [f for f in FORMS if _command_path(f[2]) in ("workspace create", "tab create", "pane split", "pane move", "worktree create", "worktree open")]
    assert len(creating) >= 6
    assert [f[0] for f in creating if "--no-focus" not in f[2]] == []


def test_09_machines_orch_drives_only_its_own_herdr() -> None:
    """0.9.1's `--machine <selector>` prefix routes a command to a saved machine (exit-2 `error: …` when refused):
    the engine's own client drives the local server only (at most `--session NAME` picks a local session), so no form
    carries --machine or --remote, which herdr refuses beside --session (a `--machine` after the command, inside a
    prompt, is payload). Only a client built for a host adds the prefix (tests/orchestrator/test_remote.py)."""
    assert [f[0] for f in FORMS if any(w.startswith(("--machine", "--remote")) for w in f[2][:1])] == []
    assert sim.machine_prefix(["agent", "prompt", "w4:p1", "--machine"]) is None


def test_095_rows4_5_orch_asks_about_machines_only_in_a_hosts_preflight() -> None:
    """0.9.2's `machine status` checks a saved machine without a terminal: only the preflight of a plan's `[hosts]`
    asks it (orchestrator/hosts.py, tests/orchestrator/test_preflight_hosts.py); `machine reconnect` needs a person at
    a terminal and is only ever named in a hint. The engine's own forms carry no machine command."""
    calls = [c.split(":")[0] for c in _engine_calls("machine_status")]
    assert ([f[0] for f in FORMS if f[2][0] == "machine"], calls, _engine_calls("machine_reconnect")) == ([], ["hosts.py"], [])


# --- 0.8.2 and 0.9 DELTA rows whose handling is what orch sends, or never sends --------------------------------------

ENGINE = [p for p in (Path(__file__).resolve().parents[2] / "orchestrator").rglob("*.py") if p.name != "herdr.py"]


def _engine_calls(method: str) -> list[str]:
    return [f"{p.name}:{n}" for p in ENGINE for n, line in enumerate(p.read_text().splitlines(), 1) if f".{method}(" in line]


def test_082_row10_orch_names_the_pane_it_means() -> None:
    """0.8.2 resolves `--current` to the caller, 0.7.5 to the UI-focused pane: every form orch sends names its pane,
    except `pane current --current`, whose answer preflight checks against HERDR_PANE_ID
    (test_preflight.py::test_082_row10_a_caller_herdr_resolves_elsewhere_stops_preflight)."""
    assert [f[0] for f in FORMS if "--current" in f[2]] == ["pane current --current"]


def test_082_row11_orch_never_closes_a_tab() -> None:
    """0.8.2 closes the workspace with its last tab (0.7.5 refused): orch never sends `tab close`."""
    assert ([f[0] for f in FORMS if _command_path(f[2]) == "tab close"], _engine_calls("tab_close")) == ([], [])


def test_082_row12_every_read_orch_sends_answers_plain_text() -> None:
    """0.8.2 read results carry `truncated`: orch reads only plain text (`pane read`, `agent read`), which has no
    such field, and never sends `pane wait-output`."""
    reads = [f for f in FORMS if _command_path(f[2]) in ("pane read", "agent read", "pane wait-output")]
    assert [f[0] for f in reads if _command_path(f[2]) == "pane wait-output" or "--json" in f[2]] == []
    assert all(isinstance(f[1](HerdrCli("herdr", runner=Seam(f[4]))), str) for f in reads)


def test_09_row5_orch_never_reports_agent_state() -> None:
    """0.9 accepts `pane report-agent` options on either side of the pane: only agents' hooks send it (the
    simulator's scripted worker uses the old order, which every release takes); orch never does."""
    assert ([f[0] for f in FORMS if "report-agent" in f[2]], _engine_calls("pane_report_agent")) == ([], [])


def test_09_row6_orch_never_trusts_a_repository_by_itself() -> None:
    """0.9's `--trust-repository` needs the person's verification of the repo, never an automatic retry: without the
    plan's `[policy] trust_repository` orch never sends it (a refusal reaches the person as herdr's error)."""
    assert [f[0] for f in FORMS if any(w.startswith("--trust-repository") for w in f[2])] == []


class ReleaseSeam(Seam):
    """A herdr of one release: `status --json` says its version; every worktree command answers `answer`."""

    def __init__(self, version: str, answer: str, code: int = 0) -> None:
        super().__init__(answer)
        self.version, self.code = version, code

    def __call__(self, argv: Sequence[str], *, env: Mapping[str, str], timeout: float) -> subprocess.CompletedProcess[str]:
        if list(argv[1:]) == ["status", "--json"]:
            status = json.loads(out("status.json"))
            status["client"]["version"] = status["server"]["version"] = self.version
            return subprocess.CompletedProcess(list(argv), 0, json.dumps(status), "")
        self.argvs.append(list(argv))
        if self.code:
            return subprocess.CompletedProcess(list(argv), self.code, "", self.stdout)
        return subprocess.CompletedProcess(list(argv), 0, self.stdout, "")


TRUSTED_FORMS = [
    (lambda h: h.worktree_list(cwd="/src/acme/widgets"), out("worktree_list.json"), ["worktree", "list", "--cwd", "/src/acme/widgets"]),
    (lambda h: h.worktree_create(workspace="w1", branch="feat/a", path="/wt"), out("worktree_create.json"),
     ["worktree", "create", "--workspace", "w1", "--branch", "feat/a", "--path", "/wt", "--no-focus"]),
    (lambda h: h.worktree_open(workspace="w1", path="/wt"), out("worktree_open.json"), ["worktree", "open", "--workspace", "w1", "--path", "/wt", "--no-focus"]),
    (lambda h: h.worktree_remove("w2"), out("worktree_remove.json"), ["worktree", "remove", "--workspace", "w2"]),
]


@pytest.mark.parametrize(("version", "verified", "sent"), [("0.9.5", True, True), ("0.9.1", True, True), ("0.9.5", False, False), ("0.8.2", True, False)])
def test_095_row7_trust_repository_only_where_the_plans_policy_verified_it(version: str, verified: bool, sent: bool) -> None:
    """`--trust-repository` (0.9.0+, still in 0.9.3's spec) goes on every worktree command exactly when the plan's
    `[policy] trust_repository` says the person verified the repository (Engine.plan_for sets it) and the server takes
    it; an older herdr would refuse the whole command, so it is left off there."""
    argvs = []
    for call, answer, argv in TRUSTED_FORMS:
        seam = ReleaseSeam(version, answer)
        herdr = HerdrCli("herdr", runner=seam, sleep=lambda _s: None)
        herdr.trust_repository = verified
        call(herdr)
        assert seam.argvs[0][:-1] == ["herdr", *argv, *(["--trust-repository"] if sent else [])], argv
        argvs.append(seam.argvs[0][-1])
    assert argvs == ["--json"] * 4


def test_095_row7_a_refused_repository_is_never_retried_with_trust() -> None:
    """Git's ownership refusal is herdr's error, once: orch never repeats a worktree command, least of all with
    `--trust-repository` added (herdr's skill: only after the person verified the repository, never as a retry)."""
    refusal = json.dumps({"id": "cli:worktree:create", "error": {"code": "worktree_create_failed",
                                                                 "message": "fatal: detected dubious ownership in repository at '/src/acme/widgets'"}})
    seam = ReleaseSeam("0.9.5", refusal + "\n", code=1)
    herdr = HerdrCli("herdr", runner=seam, sleep=lambda _s: None)
    with pytest.raises(e.HerdrWorktreeCreateFailed):
        herdr.worktree_create(workspace="w1", branch="feat/a", path="/wt")
    assert seam.argvs == [["herdr", "worktree", "create", "--workspace", "w1", "--branch", "feat/a", "--path", "/wt", "--no-focus", "--json"]]


@pytest.mark.parametrize("version", PROFILES)
def test_095_row6_the_resume_report_is_the_form_herdr_095_parses(version: str, no_server: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """orch's resume report (orchestrator/resume.py) is 0.9.3's `pane report-agent-session` synopsis with the resume
    argv after `--`: the 0.9.5 simulator parses it up to the missing server; older releases refuse it (orch sends it
    only where `features().resume_commands`)."""
    seam = Seam("")
    session = AgentSession(source="herdr:claude", agent="claude", kind="id", value="5d0c")
    HerdrCli("herdr", runner=seam).pane_report_agent_session("w1:p2", source="orch", agent="claude", session=session, resume=["claude", "--resume", "5d0c", "--model", "opus"])
    argv = seam.argvs[0][1:]
    assert argv == ["pane", "report-agent-session", "w1:p2", "--source", "orch", "--agent", "claude", "--agent-session-id", "5d0c", "--", "claude", "--resume", "5d0c", "--model", "opus"]
    monkeypatch.setenv("HERDR_SIM_VERSION", version)
    code = sim.main(argv)
    captured = capsys.readouterr()
    assert (code, captured.out, captured.err) == ((1, "", _no_server(version, no_server, "cli:request")) if version == "0.9.5" else (2, "", captured.err))
    with pytest.raises(ValueError):
        HerdrCli("herdr", runner=seam).pane_report_agent_session("w1:p2", source="orch", agent="claude", session=session, resume=["/usr/bin/claude"])
