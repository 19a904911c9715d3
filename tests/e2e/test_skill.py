"""SKILL.md, run as written: every `orch` command it shows parses, every command orch prints runs as printed, and
its fenced commands drive whole runs.

Workers record their own callbacks in the run's durable inbox (`orch inbox add` in their own panes), so the
controller pane here is a plain shell, as it is under any agent: the test plays the agent's reasoning, running
SKILL.md's own commands (placeholders filled) through bash in the controller's environment, and `orch wait` is how
it learns of callbacks. Nothing sleeps in the controller: every wait is an `orch wait` call.

Placeholders (documented in SKILL.md's Conventions): `<plan.toml>`, `<run-id>`, `<task>`, `<text>`.
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

from collections import Counter
from collections.abc import Callable
from itertools import pairwise
from typing import Any

import click
from click.testing import CliRunner

from orchestrator.cli import cli
from orchestrator.errors import ExitCode

SKILL = Path(__file__).resolve().parents[2] / "SKILL.md"
PLACEHOLDER = re.compile(r"<(plan\.toml|run-id|task|text)>")
DUMMY = {"plan.toml": "plan.toml", "run-id": "w1:p1-20260101T000000Z", "task": "greeting", "text": "why"}

# SKILL.md's fenced commands, in document order, each named by its subcommand (a variant by its distinguishing option).
FENCED = (
    "plan check", "preflight", "provision", "dispatch", "wait", "answer", "status", "inbox list", "verify", "send",
    "finish", "finish --abandon",
)  # fmt: skip
# The keys SKILL.md tells the agent to read in each command's --json output: (path, keys); a path is dotted through
# objects, and every item of a list on the way is checked.
_REPORT = ("verdict", "verdict_reasons", "workers", "callbacks", "verification", "retired", "blockers")
_INTEGRATE = ("enabled", "items", "not_accepted", "paused_by", "stopped_at", "failure")
_OBSERVE_WORKER = ("task", "state", "herdr_state", "unchanged_check_ins", "pending_question")
_VERIFY = (
    ("verdicts", ("task", "verification")),
    ("verdicts.verification", ("disposition", "reasons", "checks", "outside_claim")),
)
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
    "preflight": (("", ("ok", "run_id", "controller", "checks", "failure", "next")), ("controller", ("target",)), ("checks", ("name", "ok", "evidence", "notes"))),
    "provision": (("", ("workers", "next")), ("workers", ("task", "state", "pane_id", "tab_label", "worktree_path", "created", "reused", "notes", "error"))),
    "dispatch": (("", ("prompts_sent", "workers", "next")), ("workers", ("task", "outcome", "state", "detail", "diagnosis"))),
    "wait": (
        ("", ("woke", "observations", "workers", "active", "verify", "next")),
        ("observations", ("task", "what", "text")),
        ("workers", _OBSERVE_WORKER),
        ("next", ("do", "task", "command", "why")),
        ("verify", ("verdicts", "not_verified", "integration_paused_by")),
        *((f"verify.{path}", keys) for path, keys in _VERIFY),
    ),
    "answer": (("", ("kind", "target", "state", "next")),),
    "status": (("", ("status", "verdict", "stopped_at", "workers")), ("workers", ("task", "state", "disposition", "pane", "last_callback_kind", "pending_question"))),
    "inbox list": (("", ("messages",)), ("messages", ("id", "verdict", "reason_code", "task", "kind", "sender", "handled", "first_line"))),
    "verify": (("", ("verdicts", "not_verified", "integration_paused_by", "next")), *_VERIFY),
    "send": (("", ("kind", "target", "state", "next")),),
    "finish": _FINISH,
    "finish --abandon": _FINISH,
    # Named in prose as running alone, with the same keys as inside `orch finish`.
    "integrate": (("", _INTEGRATE),),
    "retire": (("", ("workers", "workspaces")),),
    "report": (("", _REPORT),),
}

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
    """Every `orch …` command line of the bash blocks."""
    return [line for lang, body in fenced_blocks(text) if lang == "bash" for line in body.splitlines() if line.startswith("orch ")]


def inline_commands(text: str) -> list[str]:
    """Every `orch …` inline code span outside the fenced blocks."""
    prose = re.sub(r"^```.*?^```\s*$", "", text, flags=re.S | re.M)
    return [span for span in re.findall(r"`(orch [^`]+)`", prose)]


def key_of(command: str) -> str:
    """The subcommand path a command runs (`inbox add`, `observe`, …), `finish --abandon` for that variant."""
    words = shlex.split(command)[1:]
    groups = {"plan", "inbox"}
    key = " ".join(words[:2]) if words[0] in groups else words[0]
    return f"{key} --abandon" if key == "finish" and "--abandon" in words else key


def options(command: str) -> list[str]:
    """The words of a printed command before its `-- TEXT` (the caller's words come last, whatever they look like)."""
    words = shlex.split(command)
    return words[: words.index("--")] if "--" in words else words


def fill(command: str, values: dict[str, str]) -> str:
    """Replace the documented placeholders, shell-quoted (a <text> inside SKILL.md's double quotes as it is)."""

    def one(match: re.Match[str]) -> str:
        name = match.group(1)
        value = values[name]
        if name == "text":  # SKILL.md writes it inside double quotes
            assert not set(value) & set('"$`\\'), value
            return value
        return shlex.quote(value)

    return PLACEHOLDER.sub(one, command)


# --- the static checks (no simulator) ---


def test_every_orch_command_in_skill_md_parses_and_every_subcommand_exists() -> None:
    text = SKILL.read_text()
    assert text.startswith("---\nname: herdr-orchestration\ndescription: ")
    commands = fenced_commands(text) + inline_commands(text)
    runner = CliRunner()
    for command in commands:
        argv = shlex.split(fill(command, DUMMY))
        assert argv[0] == "orch", command
        # --help is eager: click rejects unknown options and extra arguments first, then prints help and exits 0.
        done = runner.invoke(cli, [*options(shlex.join(argv))[1:], "--help"])  # after `--`, --help would be TEXT
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


def test_skill_md_says_what_to_do_for_every_next_step_orch_prints() -> None:
    from typing import get_args

    from orchestrator.door import Do

    text = SKILL.read_text()
    table = text[text.index("| `next[].do` | Do |") :].split("\n\n")[0]
    assert re.findall(r"^\| `(\w+)` \|", table, re.M) == list(get_args(Do))


def test_skill_md_says_once_when_to_run_doctor() -> None:
    """doctor is no step of a run: SKILL.md names the two cases it is for, once, and leaves it out of the call budget."""
    text = SKILL.read_text()
    assert text.count("orch doctor <plan.toml> --json") == 1
    assert "in exactly two cases: the user asks you to check the machine" in text
    (calls,) = [line for line in text.splitlines() if line.startswith("The calls of a whole run:")]
    assert "doctor" not in calls


def _command(name: str) -> Any:
    command: Any = cli
    ctx = click.Context(cli)
    for word in name.split():
        command = command.get_command(ctx, word)
    return command


# Subcommands with a --run option (the ones whose SKILL.md commands must name their run).
RUN_COMMANDS = tuple(
    name
    for name in ("provision", "dispatch", "wait", "inbox add", "observe", "answer", "status", "inbox list", "verify", "send", "finish", "integrate", "retire", "report")
    if any(p.name == "run_id" for p in _command(name).params)
)


# --- the run ---


class SkillAgent:
    """Plays the controller agent: runs SKILL.md's commands (filled), and the commands orch prints as printed, with bash
    in the controller's environment. Every call is counted; nothing here sleeps."""

    def __init__(self, world: Any, commands: list[str], plan: Path) -> None:
        self.world = world
        self.templates = {key_of(c): c for c in commands}
        self.values = {"plan.toml": str(plan)}
        self.env = dict(world.env, PATH=f"{Path(sys.executable).parent}{os.pathsep}{world.env['PATH']}")
        self.ran: list[str] = []
        self.calls: list[str] = []  # the subcommand of every `orch` call the agent made, in order
        self.spans: list[tuple[float, float]] = []  # when each call started and ended (monotonic): the time between is the agent's own
        self.waits: list[dict[str, Any]] = []  # every `orch wait` result
        self.verdicts: dict[str, str] = {}  # each task's latest disposition, as the waits reported them

    def _bash(self, key: str, command: str) -> dict[str, Any]:
        self.calls.append(key)
        started = time.monotonic()
        done = subprocess.run(["bash", "-c", command], env=self.env, cwd=self.world.repo.path, capture_output=True, text=True, timeout=300)
        self.spans.append((started, time.monotonic()))
        self._last = done
        return {"exit": done.returncode, "stdout": done.stdout, "stderr": done.stderr}

    def run(self, key: str, ok: tuple[int, ...] = (0,), **values: str) -> dict[str, Any]:
        """SKILL.md's fenced command ``key``, placeholders filled."""
        return self._parsed(key, fill(self.templates[key], {**self.values, **values}), ok)

    def follow(self, command: str, text: str | None = None, ok: tuple[int, ...] = (0,)) -> dict[str, Any]:
        """A command orch printed, run exactly as printed (TEXT replaced by the agent's words, quoted)."""
        assert command.startswith("orch ") and "--json" in options(command), command  # it carries the caller's flags
        if text is not None:
            command = command.replace(" TEXT", " " + shlex.quote(text), 1)
        assert "TEXT" not in command, command
        return self._parsed(key_of(command), command, ok)

    def _parsed(self, key: str, command: str, ok: tuple[int, ...]) -> dict[str, Any]:
        done = self._bash(key, command)
        assert done["exit"] in ok, f"{command}\nexit {done['exit']}\n{done['stdout']}\n{done['stderr']}"
        if key not in self.ran:
            self.ran.append(key)
        result: dict[str, Any] = json.loads(done["stdout"])
        if key in DOCUMENTED:
            check_keys(key, result)
        if key == "wait":
            self.waits.append(result)
            for v in (result["verify"] or {}).get("verdicts", []):
                self.verdicts[v["task"]] = v["verification"]["disposition"]
            # One exact form per step: the printed wait is SKILL.md's own.
            for step in result["next"]:
                if step["do"] == "wait":
                    assert step["command"] == fill(self.templates["wait"], self.values), step
        return result

    def wait_until(self, stop: Callable[[dict[str, Any]], bool], deadline_s: float = 300) -> dict[str, Any]:
        """§5: `orch wait` (then the wait `next` prints, as printed) until ``stop(result)``; the last result."""
        deadline = time.monotonic() + deadline_s
        result = self.run("wait")
        while not stop(result):
            assert time.monotonic() < deadline, json.dumps(result, indent=1)
            waits = [n["command"] for n in result["next"] if n["do"] == "wait"]
            assert waits, json.dumps(result, indent=1)  # the run needs something else first: the test's stop is wrong
            result = self.follow(waits[0])
        return result


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


def start_run(agent: SkillAgent, world: Any) -> str:
    """§1-4: plan check, preflight, provision, dispatch; the run id."""
    checked = agent.run("plan check")
    pre = agent.run("preflight")
    assert (pre["ok"], pre["failure"], pre["controller"]["target"]) == (True, None, world.controller_pane)
    agent.values["run-id"] = run_id = pre["run_id"]
    # Preflight's next step is SKILL.md's own provision, exactly: run it as printed.
    assert [(n["do"], n["command"]) for n in pre["next"]] == [("provision", fill(agent.templates["provision"], agent.values))]
    provisioned = agent.follow(pre["next"][0]["command"])
    assert [(w["task"], w["state"]) for w in provisioned["workers"]] == [(w["task"], "ready") for w in checked["workers"]]
    # The printed next step is SKILL.md's own dispatch, exactly: run it as printed.
    assert [(n["do"], n["command"]) for n in provisioned["next"]] == [("dispatch", fill(agent.templates["dispatch"], agent.values))]
    dispatched = agent.follow(provisioned["next"][0]["command"])
    assert dispatched["prompts_sent"] == len(checked["workers"]), dispatched
    return str(run_id)


def assert_each_callback_recorded_once(agent: SkillAgent) -> list[dict[str, Any]]:
    """Every worker's message was recorded once and accepted (workers record their own: nothing merges or is lost)."""
    listed = agent.run("inbox list")
    for m in listed["messages"]:
        assert m["verdict"] == "accepted", m
    messages: list[dict[str, Any]] = listed["messages"]
    return messages


def assert_waits_earned(agent: SkillAgent) -> None:
    """Every `orch wait` returned with something for the controller, or at its timeout: none was spent for nothing."""
    for w in agent.waits:
        news = [o for o in w["observations"] if o["what"] not in ("working", "answered", "asked_for_result", "started", "slot_freed", "integrated", "queued", "slot_kept", "report")]
        assert w["woke"] == "timeout" or news or w["woke"] == "finish", json.dumps(w, indent=1)


def next_do(result: dict[str, Any]) -> list[tuple[str, str | None]]:
    return [(n["do"], n["task"]) for n in result["next"]]


def step(result: dict[str, Any], do: str, task: str | None = None) -> str:
    """The command of ``result``'s next step ``do`` (for ``task``)."""
    (command,) = [n["command"] for n in result["next"] if n["do"] == do and n["task"] == task]
    return str(command)


def test_skill_md_commands_drive_a_two_worker_run_to_pass(world: Any, tmp_path: Path) -> None:
    text = SKILL.read_text()
    plan = world.write_plan(next(body for lang, body in fenced_blocks(text) if lang == "toml"))
    world.write_scenarios(SCENARIOS)
    agent = SkillAgent(world, fenced_commands(text), plan)
    run_id = start_run(agent, world)

    # greeting asks what the plan does not answer (the agent answers); api-docs asks what it does (orch answers).
    asked = agent.wait_until(lambda w: ("answer", "greeting") in next_do(w))
    sent = agent.follow(step(asked, "answer", "greeting"), ANSWER)
    assert (sent["kind"], sent["state"]) == ("answer", "working")
    # Each result is verified by the check-in that receives it; the waits report every verdict.
    agent.wait_until(lambda w: next_do(w) == [("finish", None)])
    assert agent.verdicts == {"greeting": "accepted", "api-docs": "rejected"}, json.dumps(agent.waits[-1], indent=1)
    status = agent.run("status")
    assert [(w["task"], w["state"]) for w in status["workers"]] == [("greeting", "accepted"), ("api-docs", "rejected")]

    # Rejected: send it back (the controller writes no work product); its new result is verified when it comes.
    sent = agent.run("send", task="api-docs", text=FOLLOW_UP)
    assert (sent["kind"], sent["state"]) == ("follow-up", "dispatched")
    done = agent.wait_until(lambda w: next_do(w) == [("finish", None)])
    assert agent.verdicts == {"greeting": "accepted", "api-docs": "accepted"}
    messages = assert_each_callback_recorded_once(agent)
    assert Counter((m["task"], m["kind"]) for m in messages) == Counter({
        ("api-docs", "question"): 1, ("greeting", "question"): 1, ("greeting", "result"): 1, ("api-docs", "result"): 2})  # fmt: skip

    finished = agent.follow(step(done, "finish"))
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
    # The controller kept focus, and its pane never received a prompt (it is a plain shell: workers never reach it).
    assert world.herdr("pane", "get", world.controller_pane)["result"]["pane"]["focused"] is True
    # The calls: the four of §1-4, the waits, one per decision (the answer, the follow-up), finish; and the test's looks.
    assert Counter(agent.calls) == Counter({
        "plan check": 1, "preflight": 1, "provision": 1, "dispatch": 1, "wait": len(agent.waits), "answer": 1, "send": 1,
        "status": 1, "inbox list": 1, "finish": 1})  # fmt: skip
    assert_waits_earned(agent)


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


def test_skill_md_drives_a_five_worker_run_to_partial_within_its_call_budget(world: Any, tmp_path: Path) -> None:
    """The issue-12 run: a question the plan does not answer, a block needing a token, a false claim of a check,
    an edit outside the claim, clean work (after a question the plan answers); the controller decides nothing for
    the user, so the run ends PARTIAL with every decision still open and its worker still there."""
    text = SKILL.read_text()
    world.write_scenarios(FIVE_SCENARIOS)
    agent = SkillAgent(world, fenced_commands(text), world.write_plan(FIVE_PLAN))
    run_id = start_run(agent, world)

    done = agent.wait_until(lambda w: ("finish", None) in next_do(w))
    # What waits on the user was surfaced in `next` as it came, with the exact command once they decide.
    decisions = {(n["do"], n["task"], n["command"]) for w in agent.waits for n in w["next"] if n["do"] in ("answer", "decide")}
    assert decisions == {
        ("answer", "ask", f"orch answer --run {run_id} ask --json -- TEXT"), ("decide", "token", f"orch answer --run {run_id} token --json -- TEXT"),
    }
    verdicts = {v["task"]: (v["verification"]["disposition"], v["verification"]["reasons"]) for w in agent.waits for v in (w["verify"] or {}).get("verdicts", [])}
    assert verdicts == {
        "claims": ("rejected", [
            "check `grep -q released notes/notes.md` failed on re-run (exit 1)",
            "worker reported `grep -q released notes/notes.md` passing, but it does not pass on re-run",
        ]),
        "outside": ("blocked", ["edited outside its claim: README.md (integration paused for a decision)"]),
        "clean": ("accepted", []),
    }, json.dumps(agent.waits, indent=1)
    assert [(w["task"], w["state"]) for w in done["workers"] if w["state"] in ("question", "blocked")] == [("ask", "question"), ("token", "blocked"), ("outside", "blocked")]

    finished = agent.follow(step(done, "finish"), ok=(10,))
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
    # Every command finish prints for a decision runs as printed (the answer reaches ask, which is still waiting).
    for w in finished["waiting"]:
        for command in w["commands"]:
            assert command.startswith("orch ") and "--json" in options(command), command
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

    # The call budget: plan check, preflight, provision, dispatch, one wait per batch of callbacks, finish.
    assert agent.calls == ["plan check", "preflight", "provision", "dispatch", *["wait"] * len(agent.waits), "finish"]
    assert_waits_earned(agent)
    # A command finish printed for a decision runs as printed: the user's answer reaches ask, which still waits.
    (answer,) = [c for w in finished["waiting"] if w["task"] == "ask" for c in w["commands"] if c.startswith("orch answer ")]
    sent = agent.follow(answer, "--colour, the British spelling.")  # words that start with `-` are the answer, as printed
    assert (sent["kind"], sent["state"]) == ("answer", "working")


SIX_PLAN = """\
organization = "acme"
repo = "widgets"
base = "main"

[defaults]
concurrency = 3
checkin_interval_s = 2

[integration]
enabled = true
branch = "chore/integrate-six"

[[workers]]
task = "core"
objective = "Write the core module."
deliverable = "src/core/ committed on feat/core."
branch = "feat/core"
claim = ["src/core/"]
verify = ["test -f src/core/core.txt"]

[[workers]]
task = "owner"
objective = "Write part a."
deliverable = "src/a/ committed on feat/shared."
branch = "feat/shared"
claim = ["src/a/"]
verify = ["ls src/a"]

[[workers]]
task = "sibling"
objective = "Write the release notes of part b."
deliverable = "src/b/ committed on feat/shared."
branch = "feat/shared"
claim = ["src/b/"]
verify = ["grep -q released src/b/notes.md"]

[[workers]]
task = "cli"
kind = "claude"
objective = "Improve the CLI help text."
deliverable = "src/cli/ committed on feat/cli-help."
branch = "feat/cli-help"
claim = ["src/cli/"]
verify = ["ls src/cli"]

[[workers]]
task = "silent"
objective = "Survey the tools folder."
deliverable = "src/tools/ committed on feat/tools."
branch = "feat/tools"
claim = ["src/tools/"]

[[workers]]
task = "ext"
objective = "Build the extension on the core module."
deliverable = "src/ext/ committed on feat/ext."
branch = "feat/ext"
claim = ["src/ext/"]
after = ["core"]
verify = ["test -f src/ext/seen-core.txt"]
"""

SIX_SCENARIOS = """
[agents.claude]
trust_dialog = true

[[task.core]]
do = "write"
path = "src/core/core.txt"
content = "core\\n"

[[task.core]]
do = "commit"

[[task.core]]
do = "verify"

[[task.core]]
do = "result"

[[task.owner]]
do = "question"
message = "Should part a log in English or in the user's language?"

[[task.owner]]
do = "write"
path = "src/a/a.txt"
content = "{answer}\\n"

[[task.owner]]
do = "commit"

[[task.owner]]
do = "verify"

[[task.owner]]
do = "result"

[[task.sibling]]
do = "write"
path = "src/b/notes.md"
content = "draft\\n"

[[task.sibling]]
do = "commit"

[[task.sibling]]
do = "result"
checks = "claimed"

[[task.cli]]
do = "write"
path = "src/cli/help.txt"
content = "usage: widgets [--help]\\n"

[[task.cli]]
do = "approval"
command = "make deploy"

[[task.cli]]
do = "commit"

[[task.cli]]
do = "verify"

[[task.cli]]
do = "result"

[[task.silent]]
do = "write"
path = "src/tools/survey.txt"
content = "started\\n"

[[follow-up.silent]]
do = "update"
message = "still thinking"

[[task.ext]]
do = "run"
command = "mkdir -p src/ext && cp src/core/core.txt src/ext/seen-core.txt"

[[task.ext]]
do = "commit"

[[task.ext]]
do = "verify"

[[task.ext]]
do = "result"
"""

OWNER_ANSWER = "English only."


def test_skill_md_drives_the_six_worker_run_to_partial_in_its_call_budget_with_no_sleep_in_the_controller(world: Any, tmp_path: Path) -> None:
    """Issue 23's walk: 6 workers at concurrency 3, an `after` chain, a sibling pair whose sibling claims a check that
    fails, a trust dialog (answered at start as policy allows) and a tool approval (the user's decision), a question
    the plan does not answer, and a worker that goes silent. The controller does only what SKILL.md and `next[]` say:
    plan check, preflight, provision, dispatch, `orch wait` until `next` says finish (each wait earned by something for
    it), one call per decision, finish; it never sleeps."""
    text = SKILL.read_text()
    world.write_scenarios(SIX_SCENARIOS)
    agent = SkillAgent(world, fenced_commands(text), world.write_plan(SIX_PLAN))
    checked = agent.run("plan check")
    assert [w["task"] for w in checked["workers"]] == ["core", "owner", "sibling", "cli", "silent", "ext"]
    pre = agent.run("preflight")
    agent.values["run-id"] = run_id = pre["run_id"]
    provisioned = agent.run("provision")
    started = [w["task"] for w in provisioned["workers"] if w["state"] == "ready"]
    assert (len(started), [w["state"] for w in provisioned["workers"] if w["task"] not in started]) == (3, ["queued"] * 3), provisioned
    agent.follow(provisioned["next"][0]["command"])  # dispatch, as printed

    decided: list[tuple[str, str | None]] = []
    result = agent.run("wait")
    while True:
        for n in result["next"]:
            if (n["do"], n["task"]) == ("answer", "owner"):
                assert agent.follow(n["command"], OWNER_ANSWER)["kind"] == "answer"
                decided.append(("answer", "owner"))
            elif (n["do"], n["task"]) == ("decide", "cli"):
                assert n["command"] == f"orch approve --run {run_id} cli --json"  # the user approved the form
                assert agent.follow(n["command"])["decision"] == "approve"
                decided.append(("approve", "cli"))
        waits = [n["command"] for n in result["next"] if n["do"] == "wait"]
        if not waits:
            break
        result = agent.follow(waits[0])
    assert sorted(decided) == [("answer", "owner"), ("approve", "cli")]
    assert [(n["do"], n["command"]) for n in result["next"]] == [("finish", f"orch finish --run {run_id} --json")]
    assert agent.verdicts == {"core": "accepted", "owner": "accepted", "sibling": "rejected", "cli": "accepted", "ext": "accepted"}, agent.waits
    # The wait that reports the sibling's rejection keeps its agent (it could be sent back); only a later one frees it.
    [told] = [w for w in agent.waits if any((o["task"], o["what"]) == ("sibling", "verified") for o in w["observations"])]
    assert ("sibling", "slot_freed") not in [(o["task"], o["what"]) for o in told["observations"]], told["observations"]
    failed = [o for w in agent.waits for o in w["observations"] if o["what"] == "failed"]
    assert [(o["task"], o["text"]) for o in failed] == [
        ("silent", "done without a result after being asked for it once; no change of state or output across 3 consecutive check-ins")]

    finished = agent.follow(result["next"][0]["command"], ok=(10,))
    report = finished["report"]
    assert (finished["finished"], finished["exit_code"], report["verdict"]) == (True, 10, "PARTIAL"), finished["report_text"]
    assert {w["task"]: w["disposition"] for w in report["workers"]} == {
        "core": "accepted", "owner": "accepted", "sibling": "rejected", "cli": "accepted", "silent": "failed", "ext": "accepted"}
    # The owner's branch carries the rejected sibling's commit: the owner is accepted but never merged with it (said in
    # blockers, not waited on), and nothing of the sibling's reaches the integration branch.
    assert [(b["task"], b["kind"]) for b in report["blockers"]] == [("silent", "failed"), ("owner", "integration_held")], report["blockers"]
    # One story: the call exits with the verdict, and the held integration says why, with nothing left to run.
    assert (finished["integrate"]["failure"]["exit_code"], finished["integrate"]["failure"]["hint"]) == (10, None), finished["integrate"]
    assert "sibling" not in world.repo.git("log", "--format=%(trailers:key=Orch-Task,valueonly)", "chore/integrate-six").split()
    # ext started from the integration branch holding core (the chain), and the sibling's false claim was caught.
    assert world.repo.git("show", "feat/ext:src/ext/seen-core.txt") == "core"
    [sibling] = [v for v in report["verification"] if v["task"] == "sibling"]
    assert "worker reported `grep -q released src/b/notes.md` passing, but it does not pass on re-run" in sibling["reasons"]
    # The trust dialog was answered at start, as policy allows; the approval form only on the user's word.
    engine = world.engine()
    dialogs = [(e.task_label, e.detail["dialog"], e.detail["answered"], e.detail["reason"]) for e in engine.ledger.events(run_id) if e.kind == "dialog"]
    engine.close()
    assert dialogs == [
        ("cli", "trust folder", True, "policy trust_run_worktrees, from default: a worktree this run created"),
        ("cli", "permission prompt", True, "approved through `orch approve`"),
    ]

    # The promise SKILL.md makes ("The calls of a whole run"), exactly: plan check, preflight, provision, dispatch; one
    # `orch wait` per batch of callbacks or per wait; one call per decision; finish; nothing else. This scenario brings
    # 7 callbacks (5 results, the owner's question, the silent worker's one update when asked for its result), 1 approval
    # form and 1 silent worker for orch to fail: at most 9 batches of news, each wait that ran to its timeout on top (a
    # wait with nothing to say is the promise's "per wait").
    callbacks, forms, silent, decisions = 7, 1, 1, 2
    timeouts = sum(1 for w in agent.waits if w["woke"] == "timeout")
    assert agent.calls[:4] == ["plan check", "preflight", "provision", "dispatch"] and agent.calls[-1] == "finish", agent.calls
    assert Counter(agent.calls[4:-1]) == Counter({"wait": len(agent.waits), "answer": 1, "approve": 1}), agent.calls
    assert len(agent.calls) <= 4 + (callbacks + forms + silent + timeouts) + decisions + 1, [w["woke"] for w in agent.waits]
    assert_waits_earned(agent)
    # No sleep in the controller: between its calls it only reads their output.
    between = sum(b[0] - a[1] for a, b in pairwise(agent.spans))
    assert between < 5, between
    # The silent worker was failed on time, by the waits' own check-ins (one owed every 2 s here): asked once for its
    # result, then failed at the third unchanged check-in after that (the check-ins, not wall time, are the unit: a
    # loaded machine makes each one slower), with the controller doing nothing but wait.
    events = world.engine().ledger.events(run_id, task_label="silent")
    asked = next(e.seq for e in events if e.kind == "message_sent" and e.detail.get("kind") == "follow-up")
    failed_at = next(e.seq for e in events if e.to_state is not None and e.to_state.value == "failed")
    check_ins = [e.detail["unchanged_check_ins"] for e in events if e.kind == "check_in" and asked < e.seq < failed_at]
    assert check_ins[-3:] == [1, 2, 3] and len(check_ins) <= 6, check_ins
    messages = assert_each_callback_recorded_once(agent)
    assert len(messages) == callbacks, messages
