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
import secrets
import shlex
import subprocess
import sys
import time
from pathlib import Path

from collections.abc import Callable
from typing import Any

import click
from click.testing import CliRunner

from orchestrator.cli import cli
from orchestrator.errors import ExitCode
from herdr_sim.testing import eventually

SKILL = Path(__file__).resolve().parents[2] / "SKILL.md"
PLACEHOLDER = re.compile(r"<(plan\.toml|run-id|task|text|message|token)>")
DUMMY = {"plan.toml": "plan.toml", "run-id": "w1:p1-20260101T000000Z", "task": "greeting", "text": "why", "message": "x", "token": "q7Rk2mXw9aT4vLp8"}

# SKILL.md's fenced commands, in document order, each named by its subcommand (a variant by its distinguishing option).
FENCED = (
    "plan check", "preflight", "provision", "dispatch", "inbox add", "observe", "answer", "status", "inbox list",
    "verify", "send", "finish", "finish --abandon",
)  # fmt: skip
# The keys SKILL.md tells the agent to read in each command's --json output: (path, keys); a path is dotted through
# objects, and every item of a list on the way is checked.
_REPORT = ("verdict", "verdict_reasons", "workers", "callbacks", "verification", "retired", "blockers")
_INTEGRATE = ("enabled", "items", "not_accepted", "paused_by", "stopped_at", "failure")
_OBSERVE = ("observations", "workers", "active")
_OBSERVE_WORKER = ("task", "state", "herdr_state", "unchanged_check_ins", "pending_question")
_FINISH = (
    ("", ("integrate", "retire", "report", "report_text", "finished", "waiting", "exit_code")),
    ("integrate", _INTEGRATE),
    ("integrate.items", ("task", "branch", "head_sha", "outcome", "integrated_sha", "conflicts", "held_by", "overlap")),
    ("integrate.failure", ("reason", "hint")),
    ("retire", ("workers", "workspaces")),
    ("retire.workers", ("task", "state", "outcome", "reason", "items")),
    ("retire.workers.items", ("kind", "id", "action", "reason")),
    ("report", _REPORT),
    ("report.workers", ("task", "state", "disposition", "integrated_sha")),
    ("report.callbacks", ("workers", "kept_aside")),
    ("report.callbacks.workers", ("accepted", "missing_result")),
    ("report.verification", ("task", "checks", "disposition", "reasons")),
    ("report.retired", ("what", "id", "status", "reason")),
    ("report.blockers", ("task", "kind", "text")),
    ("waiting", ("task", "kind", "text", "commands")),
)
DOCUMENTED: dict[str, tuple[tuple[str, tuple[str, ...]], ...]] = {
    "plan check": (("", ("workers",)), ("workers", ("task", "kind", "placement", "branch", "tab_label", "worktree", "claim"))),
    "preflight": (("", ("ok", "run_id", "controller", "checks", "failure")), ("controller", ("target",)), ("checks", ("name", "ok", "evidence", "notes"))),
    "provision": (("", ("workers",)), ("workers", ("task", "state", "pane_id", "tab_label", "worktree_path", "created", "reused", "notes", "error"))),
    "dispatch": (("", ("prompts_sent", "workers")), ("workers", ("task", "outcome", "state", "detail", "diagnosis"))),
    "inbox add": (
        ("", ("messages", "check_in", "next")),
        ("messages", ("verdict", "reason_code", "reason", "task", "kind", "state_after")),
        ("check_in", _OBSERVE),
        ("check_in.observations", ("task", "what", "text")),
        ("check_in.workers", _OBSERVE_WORKER),
        ("next", ("do", "task", "command", "why")),
    ),
    "observe": (("", _OBSERVE), ("observations", ("task", "what", "text")), ("workers", _OBSERVE_WORKER)),
    "answer": (("", ("kind", "target", "state")),),
    "status": (("", ("status", "verdict", "stopped_at", "workers")), ("workers", ("task", "state", "disposition", "pane", "last_callback_kind", "pending_question"))),
    "inbox list": (("", ("messages",)), ("messages", ("id", "verdict", "reason_code", "task", "kind", "sender", "handled", "first_line"))),
    "verify": (
        ("", ("verdicts", "not_verified", "integration_paused_by")),
        ("verdicts", ("task", "verification")),
        ("verdicts.verification", ("disposition", "reasons", "checks", "outside_claim")),
    ),
    "send": (("", ("kind", "target", "state")),),
    "finish": _FINISH,
    "finish --abandon": _FINISH,
    # Named in prose as running alone, with the same keys as inside `orch finish`.
    "integrate": (("", _INTEGRATE),),
    "retire": (("", ("workers", "workspaces")),),
    "report": (("", _REPORT),),
}

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
            heredoc = re.search(r"<<'([\w<>-]+)'$", line)
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
    """The subcommand path a command runs (`inbox add`, `observe`, …), `finish --abandon` for that variant."""
    words = shlex.split(command.splitlines()[0].split("<<")[0])[1:]
    groups = {"plan", "inbox"}
    key = " ".join(words[:2]) if words[0] in groups else words[0]
    return f"{key} --abandon" if key == "finish" and "--abandon" in words else key


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
        # SKILL.md shows two messages around a separator line; the caller's <message> already holds them all, joined.
        heredoc = heredoc.replace("<message>\n<token>\n<message>", "<message>")
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
        # Every command that works on a run names it (Conventions: pass --run anyway); a bare name in prose is no command.
        mention = len(argv) <= len(key_of(command).split(" --")[0].split()) + 1
        if key_of(command).split(" --")[0] in RUN_COMMANDS and not mention:
            assert "--run" in argv, command
    named = {key_of(fill(command, DUMMY)) for command in commands}
    for sub in named:
        done = runner.invoke(cli, [*sub.split(" --")[0].split(), "--help"])
        assert done.exit_code == 0, f"orch {sub}: {done.output}"
    # The door: these are shown as runnable commands, each once, in this order.
    assert tuple(key_of(c) for c in fenced_commands(text)) == FENCED
    assert {"resume", "run", "plan schema", "integrate", "retire", "report"} <= named
    for shapes in DOCUMENTED.values():
        for _path, keys in shapes:
            for key in keys:
                assert re.search(rf"`(?:[\w.]+\.)?{key}(?:\[\])?(?:\.[\w.]+)?`", text), key


def test_skill_md_conventions_match_the_code() -> None:
    """What the Conventions section promises: the exit codes, --run's default, the read-only commands."""
    text = SKILL.read_text()
    conventions = text[text.index("## Conventions") : text.index("## 1. Plan")]
    codes = {int(m.group(1)) for m in re.finditer(r"(\d+) (?:done|a failure|a usage|herdr missing|an internal|the run is|interrupted)", conventions)}
    assert codes == {int(c) for c in ExitCode}
    assert "`--run` defaults to the newest unfinished run of this pane" in conventions
    for name in RUN_COMMANDS:
        option = next(p for p in _command(name).params if p.name == "run_id")
        assert option.help == "Run id (default: the newest unfinished run of this pane).", name
    assert "A run ends with `orch finish`" in conventions
    for read_only in re.findall(r"`orch ([a-z ]+?)`", conventions.split("Read-only:")[1].split("\n")[0]):
        assert read_only in ("plan check", "status", "inbox list", "report"), read_only


def _command(name: str) -> Any:
    command: Any = cli
    ctx = click.Context(cli)
    for word in name.split():
        command = command.get_command(ctx, word)
    return command


# Subcommands with a --run option (the ones whose SKILL.md commands must name their run).
RUN_COMMANDS = tuple(
    name
    for name in ("provision", "dispatch", "inbox add", "observe", "answer", "status", "inbox list", "verify", "send", "finish", "integrate", "retire", "report")
    if any(p.name == "run_id" for p in _command(name).params)
)


# --- the run ---


class SkillAgent:
    """Plays the controller agent: runs SKILL.md's commands (filled) with bash in the controller's environment."""

    def __init__(self, world: Any, commands: list[str], plan: Path) -> None:
        self.world = world
        self.templates = {key_of(c): c for c in commands}
        self.values = {"plan.toml": str(plan)}
        self.env = dict(world.env, PATH=f"{Path(sys.executable).parent}{os.pathsep}{world.env['PATH']}")
        self.ran: list[str] = []
        self.calls = 0  # every `orch` call the agent made
        self.handed_over = 0  # callbacks received (and handed over) so far
        self.merged: set[int] = set()  # inbox ids orch kept aside as possible merges

    def _bash(self, key: str, values: dict[str, str]) -> subprocess.CompletedProcess[str]:
        command = fill(self.templates[key], {**self.values, **values})
        self.calls += 1
        return subprocess.run(["bash", "-c", command], env=self.env, cwd=self.world.repo.path, capture_output=True, text=True, timeout=300)

    def run(self, key: str, ok: tuple[int, ...] = (0,), **values: str) -> dict[str, Any]:
        done = self._bash(key, values)
        assert done.returncode in ok, f"{key}\nexit {done.returncode}\n{done.stdout}\n{done.stderr}"
        if key not in self.ran:
            self.ran.append(key)
        result: dict[str, Any] = json.loads(done.stdout)
        check_keys(key, result)
        return result

    def prompts(self) -> list[str]:
        """Every prompt the controller agent received, in full, from its pane."""
        screen = self.world.herdr("agent", "read", "controller", "--source", "recent-unwrapped", "--lines", "2000")
        found: list[str] = []
        current: list[str] | None = None
        for line in screen.splitlines():
            # A prompt that arrived while the agent was busy is printed right after its next `› ` input marker.
            line = line.removeprefix("› ")
            if line == "• Prompt received:":
                current = []
            elif line == "• End of prompt." and current is not None:
                found.append("\n".join(current))
                current = None
            elif current is not None and line.startswith("│ "):
                current.append(line[2:])
        return found

    def next_callbacks(self, moving: list[str], timeout_s: float = 90) -> list[str]:
        """Wait, as an agent waits for its next prompt, until a callback arrived; then take every one received so far.

        A worker sends its callback before its turn ends: once the workers that were moving have settled in herdr,
        every callback they sent is among the controller's prompts, so one handover carries them all.
        """
        eventually(lambda: len(self.prompts()) > self.handed_over or None, self.stuck, timeout_s, 0.3)
        for task in moving:
            self.world.herdr("agent", "wait", task, "--until", "idle", "--until", "done", "--until", "blocked", "--timeout", "60000")
        self.world.herdr("agent", "wait", "controller", "--timeout", "10000")
        seen = self.prompts()
        new, self.handed_over = seen[self.handed_over :], len(seen)
        return new

    def stuck(self) -> str:
        """What the run looks like when no callback comes (for the failure message)."""
        status = self.world.orch("status", "--run", self.values.get("run-id", ""))
        screen = self.world.herdr("agent", "read", "controller", "--source", "recent-unwrapped", "--lines", "60")
        return f"no new callback after {self.handed_over}:\n{status.stdout}{status.stderr}\n--- controller screen ---\n{screen}\n--- "

    def hand_over(self, messages: list[str]) -> dict[str, Any]:
        """§5: every callback received, whole and unchanged, one after the other in one heredoc, then the check-in."""
        for message in messages:
            assert message.startswith("[herdr-orchestration run="), message
        token = f"t{secrets.token_hex(8)}"  # made up anew for every call, as SKILL.md says
        return self.run("inbox add", message=f"\n{token}\n".join(messages), token=token)

    def callbacks_until(self, stop: Callable[[dict[str, Any]], bool], moving: list[str]) -> dict[str, Any]:
        """Hand callbacks over as they come until ``stop(handover)``; the last handover.

        On herdr 0.8.x two callbacks can reach the controller as one prompt (the Enter follows 300 ms after the
        answer): orch keeps it aside as a possible merge and asks each worker it names to repeat. Every message is
        accepted, or is such a possible merge, or the duplicate of a repeat (recorded once, as accepted).
        """
        deadline = time.monotonic() + 240
        while True:
            handed = self.hand_over(self.next_callbacks(moving))
            merges = {o["inbox_id"] for o in handed["check_in"]["observations"] if o["what"] == "possible_merge"}
            self.merged |= merges
            for m in handed["messages"]:
                assert m["verdict"] == "accepted" or m["inbox_id"] in merges or m["reason_code"] == "duplicate", handed
            if stop(handed):
                return handed
            moving = [w["task"] for w in handed["check_in"]["workers"] if w["state"] in ("dispatched", "working")]
            assert time.monotonic() < deadline, handed


def _at(value: Any, path: str) -> list[Any]:
    """Every value at a dotted path (lists on the way are flattened)."""
    found = [value]
    for part in [p for p in path.split(".") if p]:
        nxt: list[Any] = []
        for item in found:
            items = item if isinstance(item, list) else [item]
            nxt += [i[part] for i in items if isinstance(i, dict) and i.get(part) is not None]
        found = nxt
    return [i for v in found for i in (v if isinstance(v, list) else [v])]


def check_keys(key: str, result: dict[str, Any]) -> None:
    """Every key SKILL.md names for this command is in its JSON output."""
    for path, keys in DOCUMENTED[key]:
        for item in _at(result, path):
            assert set(keys) <= set(item), (key, path, sorted(item))


def start_controller_agent(world: Any, tmp_path: Path) -> None:
    """The person starts their controller agent in the pane they work in (see the module docstring)."""
    bin_dir = tmp_path / "controller-bin"
    bin_dir.mkdir()
    (bin_dir / "claude").write_text(CONTROLLER_AGENT.replace("{python}", sys.executable))
    (bin_dir / "claude").chmod(0o755)
    world.herdr("pane", "run", world.controller_pane, f"export PATH={shlex.quote(str(bin_dir))}:$PATH")
    world.herdr("pane", "wait-output", world.controller_pane, "--match", "$ ", "--timeout", "10000")
    started = world.herdr("agent", "start", "controller", "--kind", "claude", "--pane", world.controller_pane)
    assert started["result"]["agent"]["agent_status"] in ("idle", "done")


def start_run(agent: SkillAgent, world: Any) -> str:
    """§1-4: plan check, preflight, provision, dispatch; the run id."""
    checked = agent.run("plan check")
    pre = agent.run("preflight")
    assert (pre["ok"], pre["failure"], pre["controller"]["target"]) == (True, None, world.controller_pane)
    agent.values["run-id"] = run_id = pre["run_id"]
    provisioned = agent.run("provision")
    assert [(w["task"], w["state"]) for w in provisioned["workers"]] == [(w["task"], "ready") for w in checked["workers"]]
    dispatched = agent.run("dispatch")
    assert dispatched["prompts_sent"] == len(checked["workers"]), dispatched
    return str(run_id)


def assert_each_callback_recorded_once(agent: SkillAgent) -> None:
    """Every message accepted once: the rest were possible merges orch asked about, or duplicates of a repeat."""
    listed = agent.run("inbox list")
    for m in listed["messages"]:
        assert m["verdict"] == "accepted" or m["id"] in agent.merged or m["reason_code"] == "duplicate", m
    accepted = [(m["task"], m["kind"], m["first_line"]) for m in listed["messages"] if m["verdict"] == "accepted"]
    assert len(accepted) == len(set(accepted)), accepted


def next_do(handed: dict[str, Any]) -> list[tuple[str, str | None]]:
    return [(n["do"], n["task"]) for n in handed["next"]]


def test_skill_md_commands_drive_a_two_worker_run_to_pass(world: Any, tmp_path: Path) -> None:
    text = SKILL.read_text()
    plan = world.write_plan(next(body for lang, body in fenced_blocks(text) if lang == "toml"))
    world.write_scenarios(SCENARIOS)
    start_controller_agent(world, tmp_path)
    agent = SkillAgent(world, fenced_commands(text), plan)
    run_id = start_run(agent, world)

    # greeting asks what the plan does not answer (the agent answers); api-docs asks what it does (orch answers).
    agent.callbacks_until(lambda h: ("answer", "greeting") in next_do(h), ["greeting", "api-docs"])
    sent = agent.run("answer", task="greeting", text=ANSWER)
    assert (sent["kind"], sent["state"]) == ("answer", "working")
    agent.callbacks_until(lambda h: next_do(h) == [("verify", None)], ["greeting", "api-docs"])
    status = agent.run("status")
    assert [(w["task"], w["state"]) for w in status["workers"]] == [("greeting", "result"), ("api-docs", "result")]
    assert_each_callback_recorded_once(agent)

    verified = agent.run("verify")
    assert {v["task"]: v["verification"]["disposition"] for v in verified["verdicts"]} == {"greeting": "accepted", "api-docs": "rejected"}, json.dumps(verified, indent=1)
    # Rejected: send it back (the controller writes no work product), hand its new result over, verify again.
    sent = agent.run("send", task="api-docs", text=FOLLOW_UP)
    assert (sent["kind"], sent["state"]) == ("follow-up", "dispatched")
    agent.callbacks_until(lambda h: next_do(h) == [("verify", None)], ["api-docs"])
    verified = agent.run("verify")
    assert ({v["task"]: v["verification"]["disposition"] for v in verified["verdicts"]}, verified["not_verified"]) == ({"api-docs": "accepted"}, [])
    seen = agent.run("observe")
    assert seen["active"] is False

    finished = agent.run("finish")
    assert (finished["finished"], finished["waiting"], finished["exit_code"]) == (True, [], 0)
    assert (finished["report"]["verdict"], finished["report"]["verdict_reasons"], finished["report"]["blockers"]) == ("PASS", [], [])
    assert [(i["task"], i["outcome"]) for i in finished["integrate"]["items"]] == [("greeting", "accepted"), ("api-docs", "accepted")]
    # Integration is off in this plan: each branch holds the only copy of its commits, so its checkout is kept, with why.
    assert {w["task"]: (w["outcome"], w["reason"].split(":")[-2]) for w in finished["retire"]["workers"]} == {
        "greeting": ("retained", " not integrated"), "api-docs": ("retained", " not integrated")}
    assert finished["report_text"].startswith("Herdr: PASS\n")

    # The run is over: its report is final, and the default run of this pane is gone with it.
    assert world.engine().ledger.get_run(run_id).status.value == "finished"
    assert "Run status: finished. Exit code: 0." in (world.engine().run_dir(run_id) / "report.md").read_text().splitlines()
    assert world.repo.git("show", "feat/greeting:src/greet/hello.txt") == ANSWER
    assert world.repo.git("show", "docs/api-guide:docs/notes.md") == "Page size: 50 by default, 200 at most."
    # The controller kept focus, and its agent is still there, named as the person started it.
    assert world.herdr("pane", "get", world.controller_pane)["result"]["pane"]["focused"] is True
    assert world.herdr("agent", "get", "controller")["result"]["agent"]["pane_id"] == world.controller_pane


FIVE_PLAN = """\
organization = "acme"
repo = "widgets"
base = "main"

[defaults]
concurrency = 5

[integration]
enabled = true
branch = "chore/integrate-widgets"

[[workers]]
task = "ask"
objective = "Add a colour flag to the CLI."
deliverable = "src/cli/ committed on feat/cli-colour."
branch = "feat/cli-colour"
claim = ["src/cli/"]
verify = ["ls src/cli"]

[[workers]]
task = "token"
objective = "Wire the staging API client."
deliverable = "src/api/ committed on feat/staging."
branch = "feat/staging"
claim = ["src/api/"]
verify = ["ls src/api"]

[[workers]]
task = "claims"
objective = "Write the release notes."
deliverable = "notes/ committed on docs/notes."
branch = "docs/notes"
claim = ["notes/"]
verify = ["grep -q released notes/notes.md"]

[[workers]]
task = "outside"
objective = "Add the changelog generator."
deliverable = "tools/ committed on feat/changelog."
branch = "feat/changelog"
claim = ["tools/"]
verify = ["ls tools"]

[[workers]]
task = "clean"
objective = "Document the pagination API."
deliverable = "docs/ committed on docs/pagination."
branch = "docs/pagination"
claim = ["docs/"]
verify = ["test -f docs/pagination.md"]

[[workers.answers]]
when = "page size"
answer = "50 by default, 200 at most."
"""

FIVE_SCENARIOS = """
[[task.ask]]
do = "question"
message = "Should the flag be spelled --color or --colour?"

[[task.ask]]
do = "write"
path = "src/cli/flag.txt"

[[task.token]]
do = "blocked"
message = "Need a token for the staging API."

[[task.claims]]
do = "write"
path = "notes/notes.md"
content = "draft\\n"

[[task.claims]]
do = "commit"
message = "notes: draft"

[[task.claims]]
do = "result"
checks = "claimed"

[[task.outside]]
do = "write"
path = "tools/changelog.sh"
content = "echo changelog\\n"

[[task.outside]]
do = "write"
path = "README.md"
content = "drive-by edit\\n"
append = true

[[task.outside]]
do = "commit"
message = "tools: changelog"

[[task.outside]]
do = "verify"

[[task.outside]]
do = "result"

[[task.clean]]
do = "question"
message = "Which page size should the docs show?"

[[task.clean]]
do = "write"
path = "docs/pagination.md"
content = "Page size: {answer}\\n"

[[task.clean]]
do = "commit"
message = "docs: pagination"

[[task.clean]]
do = "verify"

[[task.clean]]
do = "result"
"""


def test_skill_md_drives_a_five_worker_run_to_partial_in_six_calls_plus_one_per_callback(world: Any, tmp_path: Path) -> None:
    """The issue-12 run: a question the plan does not answer, a block needing a token, a false claim of a check,
    an edit outside the claim, clean work (after a question the plan answers); the controller decides nothing for
    the user, so the run ends PARTIAL with every decision still open and its worker still there."""
    text = SKILL.read_text()
    world.write_scenarios(FIVE_SCENARIOS)
    start_controller_agent(world, tmp_path)
    agent = SkillAgent(world, fenced_commands(text), world.write_plan(FIVE_PLAN))
    tasks = ["ask", "token", "claims", "outside", "clean"]
    run_id = start_run(agent, world)

    handed = agent.callbacks_until(lambda h: next_do(h)[-1] == ("verify", None), tasks)
    # What waits on the user is surfaced in `next`, with the exact command once they decide.
    assert {(n["do"], n["task"], n["command"]) for n in handed["next"] if n["do"] != "verify"} <= {
        ("answer", "ask", f"orch answer --run {run_id} ask TEXT"), ("decide", "token", f"orch answer --run {run_id} token TEXT"),
    }
    verified = agent.run("verify")
    dispositions = {v["task"]: (v["verification"]["disposition"], v["verification"]["reasons"]) for v in verified["verdicts"]}
    assert dispositions == {
        "claims": ("rejected", [
            "check `grep -q released notes/notes.md` failed on re-run (exit 1)",
            "worker reported `grep -q released notes/notes.md` passing, but it does not pass on re-run",
        ]),
        "outside": ("blocked", ["edited outside its claim: README.md (integration paused for a decision)"]),
        "clean": ("accepted", []),
    }, json.dumps(verified, indent=1)
    assert ([(w["task"], w["state"]) for w in verified["not_verified"]], verified["integration_paused_by"]) == (
        [("ask", "question"), ("token", "blocked")], ["outside"])

    finished = agent.run("finish", ok=(10,))
    report = finished["report"]
    assert (finished["finished"], finished["exit_code"], report["verdict"]) == (False, 10, "PARTIAL")
    # Integration pauses only what it must: clean shares no file with outside's edit, so it is merged.
    assert [(i["task"], i["outcome"]) for i in finished["integrate"]["items"]] == [("clean", "merged")]
    assert {w["task"]: w["outcome"] for w in finished["retire"]["workers"]} == {
        "ask": "waiting", "token": "waiting", "claims": "retained", "outside": "waiting", "clean": "retired"}
    blockers = (
        "Blockers: ask question: Should the flag be spelled --color or --colour?; "
        "token blocked: Need a token for the staging API.; "
        "outside blocked by verification: edited outside its claim: README.md (integration paused for a decision)"
    )
    assert finished["report_text"].splitlines()[-1] == blockers
    assert [(w["task"], w["kind"]) for w in finished["waiting"]] == [("ask", "question"), ("token", "blocked"), ("outside", "verification_blocked")]
    # report.md was written after retire and says the same.
    markdown = (world.engine().run_dir(run_id) / "report.md").read_text()
    assert blockers in markdown.splitlines()
    # Every worker waiting on a decision still has its agent, in its own pane; the controller kept focus.
    ledger = world.engine().ledger
    for task in ("ask", "token", "outside"):
        agent_info = world.herdr("agent", "get", task)["result"]["agent"]
        assert agent_info["pane_id"] == ledger.get_worker(run_id, task).pane_id, task
    assert world.herdr("pane", "get", world.controller_pane)["result"]["pane"]["focused"] is True
    assert ledger.get_run(run_id).stopped_at == "waiting for the person: ask, token, outside"

    # The call budget: six calls plus one per callback the controller received.
    assert agent.calls <= 6 + agent.handed_over, (agent.calls, agent.handed_over)


def test_the_handover_heredoc_ends_at_a_token_made_up_for_the_call() -> None:
    """A fixed delimiter would let a worker's body line end the controller's heredoc and run the rest as shell."""
    (template,) = [c for c in fenced_commands(SKILL.read_text()) if key_of(c) == "inbox add"]
    first, *body = template.splitlines()
    assert first.endswith("--separator <token> - <<'<token>_END'"), first
    assert body == ["<message>", "<token>", "<message>", "<token>_END"]
