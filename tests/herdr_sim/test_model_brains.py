"""The scripted model's brains, driven by a tiny agent loop (real bash, real git) and through the HTTP server."""

from __future__ import annotations

import json
import subprocess
import urllib.request
from pathlib import Path

import pytest

from herdr_sim.model import brains
from herdr_sim.model.brains import REPORT_LINES, SIDE_REPLY, SLOW_LINES, Brain, BrainError, Spec, load_brains
from herdr_sim.model.conversation import Conversation, Item, Tool, ToolCall, ToolResult, UserText
from herdr_sim.model.server import ModelServer

BASH = Tool("bash", {"type": "object", "properties": {"command": {"type": "string"}}})


def packet(repo: Path, callbacks: Path) -> str:
    """A delegation packet in orch's layout (the parts a worker reads), its callback appending to ``callbacks``."""
    return f"""Delegation packet for task usage-docs (run w1:p1-20260101T000000Z)

Run ID: w1:p1-20260101T000000Z
Task label: usage-docs
Worker name: usage-docs
Worker target: usage-docs
Controller target: w1:p1
Worker kind: pi
Repository: {repo}
Working directory: {repo}
Branch: main
Base: main at 0000000000000000000000000000000000000000
Execution mode: direct

## Objective
Write a usage guide for the widgets package.

## Deliverable
docs/usage.md committed on main.

## Scope
- none

## Exclusions
- none

## File claim
You may create or change only these paths (glob patterns, relative to the working directory):
- docs/

Commit only files you changed yourself, and end every commit message with the trailer line `Orch-Task: usage-docs`.

## Evidence required
- none

## Verification
Run each command from the working directory and paste its real output in your result:
- `grep -q 'Python 3.11' docs/usage.md`
- `test -f docs/usage.md`

## Stop conditions
- none

## Message Contract
Send every message with exactly this command, replacing <kind> and <message>:

```sh
printf '%s\\n---\\n' "[herdr-orchestration run=w1:p1-20260101T000000Z task=usage-docs from=usage-docs kind=<kind> reply-to=usage-docs]
<message>" >> {callbacks}
```
"""


def envelope(kind: str, body: str) -> str:
    return f"[herdr-orchestration run=w1:p1-20260101T000000Z task=usage-docs from=orch kind={kind} reply-to=orch]\n{body}"


def agent_loop(brain: Brain, items: list[Item], tools: tuple[Tool, ...] = (BASH,)) -> str:
    """What an agent does with the model: run each tool call (bash), send the output back, until the turn ends."""
    for _ in range(20):
        reply = brain.respond(Conversation("chat", "m", "system", tuple(items), tools, True))
        if not reply.calls:
            return reply.text
        for call in reply.calls:
            items.append(ToolCall(call.call_id, call.name, call.arguments))
            done = subprocess.run(["bash", "-c", call.arguments["command"]], capture_output=True, text=True, timeout=60)
            items.append(ToolResult(call.call_id, done.stdout + done.stderr))
    raise AssertionError("the turn never ended")


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    path = tmp_path / "widgets"
    path.mkdir()
    for argv in (["init", "-q", "-b", "main"], ["commit", "-q", "--allow-empty", "-m", "init"]):
        subprocess.run(["git", *argv], cwd=path, check=True, timeout=30)
    return path


def git(repo: Path, *argv: str) -> str:
    return subprocess.run(["git", *argv], cwd=repo, check=True, capture_output=True, text=True, timeout=30).stdout


def test_the_worker_edits_its_claim_commits_by_path_runs_the_checks_and_sends_its_result(repo: Path, tmp_path: Path) -> None:
    callbacks = tmp_path / "callbacks.txt"
    (repo / "stray.txt").write_text("a sibling's file, not this worker's")
    items: list[Item] = [UserText(packet(repo, callbacks))]

    final = agent_loop(Brain(), items)

    sha = git(repo, "rev-parse", "HEAD").strip()
    assert git(repo, "show", "--name-only", "--format=%s%n%b", "HEAD") == (
        "usage-docs: docs/usage.md committed on main.\nOrch-Task: usage-docs\n\n\ndocs/usage.md\n")
    assert (repo / "docs" / "usage.md").read_text() == (
        "# docs/usage.md committed on main.\n\nWrite a usage guide for the widgets package.\n\nPython 3.11\n")
    assert git(repo, "status", "--porcelain") == "?? stray.txt\n"  # a sibling's file is never taken along
    assert callbacks.read_text() == (
        "[herdr-orchestration run=w1:p1-20260101T000000Z task=usage-docs from=usage-docs kind=result reply-to=usage-docs]\n"
        f"Status: done\nCommits: {sha}\nChanged files: docs/usage.md\nChecks:\n"
        "- grep -q 'Python 3.11' docs/usage.md => exit 0\n- test -f docs/usage.md => exit 0\nResidual risk: none\n---\n"
    )
    assert final == "I sent my result to the controller with the packet's callback command; my turn ends here."
    # Asked again with the same conversation, it does nothing more: the turn is over.
    assert agent_loop(Brain(), items) == final and callbacks.read_text().count("kind=result") == 1


def test_the_question_brain_asks_ends_its_turn_then_works_the_answer_in(repo: Path, tmp_path: Path) -> None:
    callbacks = tmp_path / "callbacks.txt"
    brain = Brain({"usage-docs": Spec(brain="question", question="Which Python version should the guide name?")})
    items: list[Item] = [UserText(packet(repo, callbacks))]

    first = agent_loop(brain, items)

    assert first == "I sent my question to the controller with the packet's callback command; my turn ends here."
    assert callbacks.read_text().endswith("kind=question reply-to=usage-docs]\nWhich Python version should the guide name?\n---\n")
    assert git(repo, "log", "--format=%s") == "init\n"

    items.append(UserText(envelope("answer", "Python 3.12 or newer.")))
    agent_loop(brain, items)

    assert (repo / "docs" / "usage.md").read_text().endswith("Python 3.11\nPython 3.12 or newer.\n")
    assert callbacks.read_text().count("kind=result") == 1


def test_the_false_claim_brain_reports_passing_checks_it_never_ran(repo: Path, tmp_path: Path) -> None:
    callbacks = tmp_path / "callbacks.txt"
    agent_loop(Brain({"usage-docs": Spec(brain="false-claim")}), [UserText(packet(repo, callbacks))])

    assert not (repo / "docs").exists()
    assert callbacks.read_text().split("\n", 1)[1] == (
        "Status: done\nCommits: none\nChanged files: docs/usage.md\nChecks:\n"
        "- grep -q 'Python 3.11' docs/usage.md => exit 0\n  | OK\n- test -f docs/usage.md => exit 0\n  | OK\nResidual risk: none\n---\n")


def test_blocked_and_silent_brains(repo: Path, tmp_path: Path) -> None:
    callbacks = tmp_path / "callbacks.txt"
    agent_loop(Brain({"usage-docs": Spec(brain="blocked", reason="I need a person to approve the new dependency.")}),
               [UserText(packet(repo, callbacks))])
    assert callbacks.read_text().endswith("kind=blocked reply-to=usage-docs]\nI need a person to approve the new dependency.\n---\n")

    callbacks.unlink()
    items: list[Item] = [UserText(packet(repo, callbacks))]
    silent = agent_loop(Brain({"usage-docs": Spec(brain="silent")}), items)
    items.append(UserText(envelope("follow-up", "Send your result with the callback command.")))
    again = agent_loop(Brain({"usage-docs": Spec(brain="silent")}), items)
    assert (silent, again, callbacks.exists()) == ("I read the task; I am leaving it here.", silent, False)


def test_the_slow_brain_prints_a_long_build_as_it_goes_then_works(repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(brains, "SLOW_PAUSE_S", 0)  # the lane's pace is half a second a line; here only the lines matter
    callbacks = tmp_path / "callbacks.txt"
    items: list[Item] = [UserText(packet(repo, callbacks))]

    agent_loop(Brain({"usage-docs": Spec(brain="slow")}), items)

    build = items[2]
    assert isinstance(build, ToolResult)
    assert build.text.splitlines() == [
        f"build step {i} of {SLOW_LINES}: compiling module {i}, linking, checking its tests (slow and verbose on purpose)"
        for i in range(1, SLOW_LINES + 1)]  # fmt: skip
    sha = git(repo, "rev-parse", "HEAD").strip()
    assert callbacks.read_text().split("\n", 1)[1] == (
        f"Status: done\nCommits: {sha}\nChanged files: docs/usage.md\nChecks:\n"
        "- grep -q 'Python 3.11' docs/usage.md => exit 0\n- test -f docs/usage.md => exit 0\nResidual risk: none\n---\n")


def test_the_report_brain_writes_a_large_report_where_the_packet_lets_it_and_sends_its_path(repo: Path, tmp_path: Path) -> None:
    callbacks = tmp_path / "callbacks.txt"
    reports = tmp_path / "run" / "reports" / "usage-docs"
    text = packet(repo, callbacks).replace(
        "Send every message with exactly this command",
        f"Write any report inside your working directory or {reports}, and send its absolute path on a `Report:` line.\n"
        "Send every message with exactly this command")

    agent_loop(Brain({"usage-docs": Spec(brain="report")}), [UserText(text)])

    report = reports / "usage-docs-report.md"
    lines = report.read_text().splitlines()
    assert (len(lines), lines[:3], lines[-1]) == (REPORT_LINES + 2, [
        "# Report for task usage-docs", "", "- finding 1: the deliverable was checked against requirement 1, and it holds"],
        f"- finding {REPORT_LINES}: the deliverable was checked against requirement {REPORT_LINES}, and it holds")
    sha = git(repo, "rev-parse", "HEAD").strip()
    assert callbacks.read_text().split("\n", 1)[1] == (
        f"Status: done\nCommits: {sha}\nChanged files: docs/usage.md\nChecks:\n"
        "- grep -q 'Python 3.11' docs/usage.md => exit 0\n- test -f docs/usage.md => exit 0\n"
        f"Report: {report}\nResidual risk: none\n---\n")


def test_a_stop_envelope_ends_the_turn_without_work(repo: Path, tmp_path: Path) -> None:
    callbacks = tmp_path / "callbacks.txt"
    items: list[Item] = [UserText(packet(repo, callbacks)), UserText(envelope("stop", "Stop now."))]
    assert agent_loop(Brain(), items) == "I read the task; I am leaving it here."
    assert not callbacks.exists()


def test_side_requests_and_chat_get_a_short_answer_and_no_tool_call(repo: Path, tmp_path: Path) -> None:
    brain = Brain()
    # A title request carries the packet but offers no tools; plain chat offers tools but has no packet.
    assert brain.respond(Conversation("chat", "m", "title", (UserText(packet(repo, tmp_path / "c")),), (), True)).text == SIDE_REPLY
    assert brain.respond(Conversation("chat", "m", "s", (UserText("hello"),), (BASH,), True)).calls == ()


def test_the_shell_call_takes_the_tools_own_argument_shape(repo: Path, tmp_path: Path) -> None:
    conv = Conversation("responses", "m", "s", (UserText(packet(repo, tmp_path / "c")),),
                        (Tool("exec_command", {"properties": {"cmd": {"type": "string"}, "workdir": {"type": "string"}}}),), True)
    [call] = Brain().respond(conv).calls
    assert (call.name, list(call.arguments), call.call_id[:5]) == ("exec_command", ["cmd"], "call_")

    escalating = Conversation("responses", "m", "approval_policy is `on-request`", conv.items,
                              (Tool("exec_command", {"properties": {"cmd": {}, "sandbox_permissions": {}, "justification": {}}}),), True)
    [call] = Brain().respond(escalating).calls
    assert (call.arguments["sandbox_permissions"], sorted(call.arguments)) == ("require_escalated", ["cmd", "justification", "sandbox_permissions"])
    # codex refuses any escalation under approval policy never (its permissions text says so): none is asked for.
    never = Conversation("responses", "m", "Approval policy is currently never. Do not provide the `sandbox_permissions`",
                         conv.items, escalating.tools, True)
    [call] = Brain().respond(never).calls
    assert list(call.arguments) == ["cmd"]

    conv = Conversation("anthropic", "m", "s", conv.items,
                        (Tool("Bash", {"properties": {"command": {"type": "array"}, "description": {"type": "string"}}}),), True)
    [call] = Brain().respond(conv).calls
    assert (call.arguments["command"][:2], call.arguments["description"], call.call_id[:6]) == (
        ["bash", "-lc"], "Run a step of the delegated task", "toolu_")


def test_a_brains_file_names_a_brain_per_task_and_refuses_unknown_ones(tmp_path: Path) -> None:
    path = tmp_path / "brains.toml"
    path.write_text('[task.usage-docs]\nbrain = "question"\nquestion = "Which version?"\n')
    assert load_brains(path) == {"usage-docs": Spec(brain="question", question="Which version?")}
    path.write_text('[task.usage-docs]\nbrain = "genius"\n')
    with pytest.raises(BrainError, match="task usage-docs: unknown key or brain"):
        load_brains(path)


def test_the_server_streams_each_protocol_and_logs_every_request(repo: Path, tmp_path: Path) -> None:
    log = tmp_path / "model.jsonl"
    with ModelServer(log) as model:
        def post(path: str, body: dict[str, object]) -> bytes:
            request = urllib.request.Request(model.url + path, json.dumps(body).encode(), {"Content-Type": "application/json"})
            with urllib.request.urlopen(request, timeout=10) as answer:
                return answer.read()

        text = packet(repo, tmp_path / "c")
        chat = post("/v1/chat/completions", {"model": "m", "stream": True, "messages": [{"role": "user", "content": text}],
                                             "tools": [{"type": "function", "function": {"name": "bash", "parameters": BASH.schema}}]})
        anthropic = post("/v1/messages?beta=true", {"model": "m", "stream": False, "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}]})
        tokens = post("/v1/messages/count_tokens", {"model": "m", "messages": [{"role": "user", "content": "hi"}]})
        responses = post("/v1/responses", {"model": "m", "stream": True, "input": "hi"})

    assert chat.endswith(b"data: [DONE]\n\n") and b'"name":"bash"' in chat
    assert json.loads(anthropic)["content"] == [{"type": "text", "text": SIDE_REPLY}]
    assert json.loads(tokens)["input_tokens"] > 0
    assert b"event: response.completed" in responses
    logged = [json.loads(line) for line in log.read_text().splitlines()]
    assert [(e["n"], e["path"], e.get("protocol"), e.get("task")) for e in logged] == [
        (1, "/v1/chat/completions", "chat", "usage-docs"), (2, "/v1/messages", "anthropic", None),
        (3, "/v1/messages/count_tokens", "anthropic", None), (4, "/v1/responses", "responses", None)]
    assert logged[0]["request"]["messages"][0]["content"] == text  # what the agent sent, whole
