"""SKILL.md, run as written: every `orch` command it shows parses, and its fenced commands drive a run to PASS.

The agent controller of the SKILL door is itself an agent in the controller pane: workers call back with
`herdr agent prompt <controller pane>`, so a plain shell there would refuse them (`agent_not_ready`). The test
therefore starts an agent in the controller pane with `herdr agent start controller --kind claude`, as the
person would start their controller agent. herdr-sim's stock scripted claude cannot serve as that agent: it
shows a multi-line paste only as `[Pasted: <first line> +N lines]` (like real agent TUIs) and keeps the text
nowhere, while an LLM controller has the whole prompt in its context. The smallest faithful alternative is the
stock scripted agent with one change, `CONTROLLER_AGENT` below: it prints every prompt it receives in full.
It is put first on the controller shell's PATH (as `claude`) before `herdr agent start`, so herdr starts,
recognises and prompts it exactly like any claude. The test then plays the agent's reasoning: it reads the
controller pane (`herdr agent read`) for each `[herdr-orchestration …]` envelope and runs SKILL.md's own
commands, placeholders filled, through bash in the controller's environment.

Placeholders (documented in SKILL.md's Conventions): `<plan.toml>`, `<run-id>`, `<task>`, `<text>`, `<message>`.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
import time
from pathlib import Path

import pytest
from collections.abc import Callable
from typing import Any

from click.testing import CliRunner

from orchestrator.cli import cli
from herdr_sim import versions
from herdr_sim.testing import eventually

SKILL = Path(__file__).resolve().parents[2] / "SKILL.md"
PLACEHOLDER = re.compile(r"<(plan\.toml|run-id|task|text|message)>")
DUMMY = {"plan.toml": "plan.toml", "run-id": "w1:p1-20260101T000000Z", "task": "greeting", "text": "why", "message": "x"}

# The keys SKILL.md tells the agent to read in each command's --json output (top level; nested ones below).
DOCUMENTED_KEYS: dict[str, tuple[str, ...]] = {
    "plan check": ("workers",),
    "preflight": ("ok", "run_id", "controller", "checks", "failure"),
    "provision": ("workers",),
    "dispatch": ("prompts_sent", "workers"),
    "inbox add": ("verdict", "reason_code", "reason", "task", "kind", "state_after"),
    "observe": ("observations", "workers", "active"),
    "answer": ("kind", "target", "state"),
    "status": ("status", "verdict", "stopped_at", "workers"),
    "inbox list": ("messages",),
    "verify": ("verdicts", "not_verified", "integration_paused_by"),
    "send": ("kind", "target", "state"),
    "integrate": ("enabled", "items", "not_accepted", "paused_by", "stopped_at"),
    "retire": ("workers", "workspaces"),
    "report": ("verdict", "verdict_reasons", "workers", "callbacks", "verification", "retired", "blockers"),
}
NESTED_KEYS: dict[str, tuple[str, ...]] = {
    "plan check": ("task", "kind", "placement", "branch", "tab_label", "worktree", "claim"),
    "provision": ("task", "state", "pane_id", "tab_label", "worktree_path", "created", "reused", "notes", "error"),
    "dispatch": ("task", "outcome", "state", "detail", "diagnosis"),
    "observe": ("task", "state", "herdr_state", "unchanged_check_ins", "pending_question"),
    "status": ("task", "state", "disposition", "pane", "last_callback_kind", "pending_question"),
    "inbox list": ("id", "verdict", "reason_code", "task", "kind", "sender", "handled", "first_line"),
    "retire": ("task", "state", "outcome", "reason", "items"),
    "report": ("task", "state", "disposition", "integrated_sha"),
}
# The list each nested key set is read from.
NESTED_IN = {"inbox list": "messages"}

# The controller agent: herdr-sim's scripted agent, except that it shows every prompt in full (see the docstring).
CONTROLLER_AGENT = '''#!{python}
"""Test controller agent: herdr-sim's scripted agent that prints every prompt it receives in full."""
import os
import sys

from herdr_sim.agent import _log_path
from herdr_sim.agent.console import Console
from herdr_sim.agent.worker import Agent


class Controller(Agent):
    def handle(self, text):
        self.report("working")
        self.console.say("• Prompt received:")
        for line in text.strip("\\n").splitlines():
            self.console.say("│ " + line)
        self.console.say("• End of prompt.")
        self.report("idle")


env = dict(os.environ)
console = Console(_log_path(env))
with console:
    code = Controller("claude", env, console).run()
sys.exit(code)
'''

SCENARIOS = """
[[task.greeting]]
do = "question"
message = "Should the greeting be formal or casual?"

[[task.greeting]]
do = "write"
path = "src/greet/hello.txt"
content = "{answer}\\n"

[[task.greeting]]
do = "commit"
message = "greeting: add hello"

[[task.greeting]]
do = "verify"

[[task.greeting]]
do = "result"

[[task.api-docs]]
do = "question"
message = "Which page size should the docs show?"

[[task.api-docs]]
do = "write"
path = "docs/notes.md"
content = "Page size: {answer}\\n"

[[task.api-docs]]
do = "commit"
message = "docs: page size notes"

[[task.api-docs]]
do = "result"

[[follow-up.api-docs]]
do = "write"
path = "docs/api.md"
content = "# API\\n\\n{answer}\\n"

[[follow-up.api-docs]]
do = "commit"
message = "docs: widgets API"

[[follow-up.api-docs]]
do = "verify"

[[follow-up.api-docs]]
do = "result"
"""

ANSWER = "Casual, please."
FOLLOW_UP = "docs/api.md is missing: write the API page there and send a new result."


# --- reading SKILL.md ---


def fenced_blocks(text: str) -> list[tuple[str, str]]:
    """Every fenced code block as (language, body), in document order."""
    return [(m.group(1), m.group(2)) for m in re.finditer(r"^```(\w*)\n(.*?)^```\s*$", text, re.S | re.M)]


def fenced_commands(text: str) -> list[str]:
    """Every `orch …` command of the bash blocks, a heredoc kept with the command that reads it."""
    commands: list[str] = []
    for lang, body in fenced_blocks(text):
        if lang != "bash":
            continue
        lines = body.splitlines()
        i = 0
        while i < len(lines):
            line = lines[i]
            i += 1
            if not line.startswith("orch "):
                continue
            command = [line]
            heredoc = re.search(r"<<'(\w+)'$", line)
            if heredoc:
                while i < len(lines):
                    command.append(lines[i])
                    i += 1
                    if command[-1] == heredoc.group(1):
                        break
            commands.append("\n".join(command))
    return commands


def inline_commands(text: str) -> list[str]:
    """Every `orch …` inline code span outside the fenced blocks."""
    prose = re.sub(r"^```.*?^```\s*$", "", text, flags=re.S | re.M)
    return [span for span in re.findall(r"`(orch [^`]+)`", prose)]


def key_of(command: str) -> str:
    """The subcommand path a command runs: `inbox add`, `observe`, …"""
    words = shlex.split(command.splitlines()[0].split("<<")[0])[1:]
    groups = {"plan", "inbox"}
    return " ".join(words[:2]) if words[0] in groups else words[0]


def fill(command: str, values: dict[str, str]) -> str:
    """Replace the documented placeholders; shell-quote them outside a heredoc and a quoted <text>."""
    first, _, heredoc = command.partition("\n")

    def one(match: re.Match[str]) -> str:
        name = match.group(1)
        value = values[name]
        if name == "text":  # SKILL.md writes it inside double quotes
            assert not set(value) & set('"$`\\'), value
            return value
        return shlex.quote(value)

    first = PLACEHOLDER.sub(one, first)
    if heredoc:
        heredoc = PLACEHOLDER.sub(lambda m: values[m.group(1)], heredoc)
        return f"{first}\n{heredoc}"
    return first


# --- the static checks (no simulator) ---


def test_every_orch_command_in_skill_md_parses_and_every_subcommand_exists() -> None:
    text = SKILL.read_text()
    assert text.startswith("---\nname: herdr-orchestration\ndescription: ")
    commands = fenced_commands(text) + inline_commands(text)
    runner = CliRunner()
    for command in commands:
        argv = shlex.split(fill(command, DUMMY).splitlines()[0].split("<<")[0])
        assert argv[0] == "orch", command
        # --help is eager: click rejects unknown options and extra arguments first, then prints help and exits 0.
        done = runner.invoke(cli, [*argv[1:], "--help"])
        assert done.exit_code == 0, f"{command}\n{done.output}"
    named = {key_of(fill(command, DUMMY)) for command in commands}
    for sub in named:
        done = runner.invoke(cli, [*sub.split(), "--help"])
        assert done.exit_code == 0, f"orch {sub}: {done.output}"
    # The brief's door: these are shown as runnable commands, each once, in this order.
    assert [key_of(c) for c in fenced_commands(text)] == list(DOCUMENTED_KEYS)
    assert {"resume", "run", "plan schema"} <= named
    for keys in (*DOCUMENTED_KEYS.values(), *NESTED_KEYS.values()):
        for key in keys:
            assert re.search(rf"`(?:[\w.]+\.)?{key}(?:\[\])?(?:\.[\w.]+)?`", text), key


# --- the run ---


class SkillAgent:
    """Plays the controller agent: runs SKILL.md's commands (filled) with bash in the controller's environment."""

    def __init__(self, world: Any, commands: list[str], plan: Path) -> None:
        self.world = world
        self.templates = {key_of(c): c for c in commands}
        self.values = {"plan.toml": str(plan)}
        self.env = dict(world.env, PATH=f"{Path(sys.executable).parent}{os.pathsep}{world.env['PATH']}")
        self.ran: list[str] = []
        self.handed_over = 0

    def run(self, key: str, ok: tuple[int, ...] = (0,), **values: str) -> dict[str, Any]:
        command = fill(self.templates[key], {**self.values, **values})
        done = subprocess.run(["bash", "-c", command], env=self.env, cwd=self.world.repo.path, capture_output=True, text=True, timeout=300)
        assert done.returncode in ok, f"{command}\nexit {done.returncode}\n{done.stdout}\n{done.stderr}"
        if key not in self.ran:
            self.ran.append(key)
        result: dict[str, Any] = json.loads(done.stdout)
        self.check_keys(key, result)
        return result

    def try_run(self, key: str, **values: str) -> dict[str, Any] | None:
        """A command that may be refused for a reason the agent retries later (e.g. the worker still working)."""
        command = fill(self.templates[key], {**self.values, **values})
        done = subprocess.run(["bash", "-c", command], env=self.env, cwd=self.world.repo.path, capture_output=True, text=True, timeout=300)
        if done.returncode != 0:
            assert "worker" in done.stderr and "in herdr" in done.stderr, done.stderr
            return None
        if key not in self.ran:
            self.ran.append(key)
        return json.loads(done.stdout)

    @staticmethod
    def check_keys(key: str, result: dict[str, Any]) -> None:
        assert set(DOCUMENTED_KEYS[key]) <= set(result), (key, sorted(result))
        items = result.get(NESTED_IN.get(key, "workers"))
        if key in NESTED_KEYS and items:
            for item in items:
                assert set(NESTED_KEYS[key]) <= set(item), (key, sorted(item))

    def prompts(self) -> list[str]:
        """Every prompt the controller agent received, in full, from its pane."""
        screen = self.world.herdr("agent", "read", "controller", "--source", "recent-unwrapped", "--lines", "1000")
        found: list[str] = []
        current: list[str] | None = None
        for line in screen.splitlines():
            if line == "• Prompt received:":
                current = []
            elif line == "• End of prompt." and current is not None:
                found.append("\n".join(current))
                current = None
            elif current is not None and line.startswith("│ "):
                current.append(line[2:])
        return found

    def next_callbacks(self, timeout_s: float = 60) -> list[str]:
        """Wait (polling the pane, as an agent waits for its next prompt) until new callbacks arrived."""
        try:
            seen = eventually(lambda: (found if len(found := self.prompts()) > self.handed_over else None), "no new callback", timeout_s, 0.3)
        except AssertionError:
            seen = self.prompts()  # none arrived: the caller sees an empty list and says what it expected
        new, self.handed_over = seen[self.handed_over :], len(seen)
        return new

    def settle(self, tasks: list[str]) -> None:
        """Wait, as the agent waits for its next prompt, until these workers are settled in herdr.

        A worker sends its callback before its turn ends, so once herdr shows it settled the callback is in the
        controller's prompts: handed over before the check-in, it is never mistaken for a missing result.
        """
        for task in tasks:
            self.world.herdr("agent", "wait", task, "--timeout", "60000")
        self.world.herdr("agent", "wait", "controller", "--timeout", "10000")

    def observe_until(self, done: Callable[[dict[str, Any]], bool], moving: list[str], answer_after: set[str] = frozenset()) -> None:  # type: ignore[assignment]
        """§5: hand every callback over, check in once, answer what needs an answer, until ``done(workers)``.

        Questions the plan does not answer are answered once the tasks in ``answer_after`` sent their result.
        """
        deadline = time.monotonic() + 180
        needs: set[str] = set()
        while True:
            self.settle(moving)
            for message in self.next_callbacks(timeout_s=0):
                assert message.startswith("[herdr-orchestration run="), message
                added = self.run("inbox add", message=message)
                assert added["verdict"] == "accepted", added
            seen = self.run("observe")
            needs |= {o["task"] for o in seen["observations"] if o["what"] == "needs_answer"}
            assert not {o["what"] for o in seen["observations"]} & {"failed", "kept_aside", "blocked", "gone", "asked_for_result"}, seen
            states = {w["task"]: w for w in seen["workers"]}
            if all(states[t]["state"] in ("result", "accepted") for t in answer_after):
                for task in sorted(needs):
                    if states[task]["state"] == "question" and self.try_run("answer", task=task, text=ANSWER) is not None:
                        needs.discard(task)
            moving = [task for task, w in states.items() if w["state"] in ("dispatched", "working")]
            if done(states):
                return
            assert time.monotonic() < deadline, seen


@pytest.mark.xfail(
    versions.current().enter_after_answer_ms is not None, strict=False,
    reason="herdr 0.8.2 writes Enter 300 ms after answering (../herdr-0.8.2/DELTA.md row 5): two workers' callbacks to "
    "the controller agent within that window can merge into one line, which the inbox keeps aside; seen on the 0.8.2 lane",
)
def test_skill_md_commands_drive_a_two_worker_run_to_pass(world: Any, tmp_path: Path) -> None:
    text = SKILL.read_text()
    plan = world.write_plan(next(body for lang, body in fenced_blocks(text) if lang == "toml"))
    world.write_scenarios(SCENARIOS)
    # The person starts their controller agent in the pane they work in (see the module docstring).
    bin_dir = tmp_path / "controller-bin"
    bin_dir.mkdir()
    (bin_dir / "claude").write_text(CONTROLLER_AGENT.replace("{python}", sys.executable))
    (bin_dir / "claude").chmod(0o755)
    world.herdr("pane", "run", world.controller_pane, f"export PATH={shlex.quote(str(bin_dir))}:$PATH")
    world.herdr("pane", "wait-output", world.controller_pane, "--match", "$ ", "--timeout", "10000")
    started = world.herdr("agent", "start", "controller", "--kind", "claude", "--pane", world.controller_pane)
    assert started["result"]["agent"]["agent_status"] in ("idle", "done")

    agent = SkillAgent(world, fenced_commands(text), plan)
    checked = agent.run("plan check")
    assert [(w["task"], w["kind"], w["tab_label"]) for w in checked["workers"]] == [
        ("greeting", "codex", "widgets-feat-greeting"), ("api-docs", "claude", "widgets-docs-api-guide")]
    pre = agent.run("preflight")
    assert (pre["ok"], pre["failure"], pre["controller"]["target"]) == (True, None, world.controller_pane)
    agent.values["run-id"] = run_id = pre["run_id"]
    provisioned = agent.run("provision")
    assert [(w["task"], w["state"]) for w in provisioned["workers"]] == [("greeting", "ready"), ("api-docs", "ready")]
    dispatched = agent.run("dispatch")
    assert (dispatched["prompts_sent"], [w["outcome"] for w in dispatched["workers"]]) == (2, ["accepted", "accepted"])

    # greeting asks what the plan does not answer (the agent answers); api-docs asks what it does (orch answers).
    agent.observe_until(lambda w: w["greeting"]["state"] == w["api-docs"]["state"] == "result", ["greeting", "api-docs"], answer_after={"api-docs"})
    status = agent.run("status")
    assert [(w["task"], w["state"]) for w in status["workers"]] == [("greeting", "result"), ("api-docs", "result")]
    listed = agent.run("inbox list")
    assert {m["verdict"] for m in listed["messages"]} == {"accepted"}

    verified = agent.run("verify")
    assert {v["task"]: v["verification"]["disposition"] for v in verified["verdicts"]} == {"greeting": "accepted", "api-docs": "rejected"}, json.dumps(verified, indent=1)
    # Rejected: send it back (the controller writes no work product), observe, verify again.
    sent = agent.run("send", task="api-docs", text=FOLLOW_UP)
    assert (sent["kind"], sent["state"]) == ("follow-up", "dispatched")
    agent.observe_until(lambda w: w["api-docs"]["state"] == "result", ["api-docs"])
    verified = agent.run("verify")
    assert {v["task"]: v["verification"]["disposition"] for v in verified["verdicts"]} == {"api-docs": "accepted"}

    integrated = agent.run("integrate")
    assert (integrated["enabled"], [i["task"] for i in integrated["items"]]) == (False, ["greeting", "api-docs"])
    retired = agent.run("retire")
    assert {w["task"] for w in retired["workers"]} == {"greeting", "api-docs"}
    report = agent.run("report")
    assert (report["verdict"], report["verdict_reasons"], report["blockers"]) == ("PASS", [], [])

    assert agent.ran == list(DOCUMENTED_KEYS)  # every fenced command ran, first in SKILL.md's order
    shown = world.orch("report", "--run", run_id)
    assert shown.returncode == 0 and shown.stdout.startswith("Herdr: PASS\n"), shown.stdout
    assert world.repo.git("show", "feat/greeting:src/greet/hello.txt") == ANSWER
    assert world.repo.git("show", "docs/api-guide:docs/notes.md") == "Page size: 50 by default, 200 at most."
    # The controller kept focus, and its agent is still there, named as the person started it.
    assert world.herdr("pane", "get", world.controller_pane)["result"]["pane"]["focused"] is True
    assert world.herdr("agent", "get", "controller")["result"]["agent"]["pane_id"] == world.controller_pane

