"""Brains: what the scripted model answers, decided only from the conversation an agent sends (orch's packet in it).

A brain never knows the test: it reads the delegation packet (and any envelopes after it) out of the conversation,
plans shell commands a careful worker would run through the agent's own shell tool, and reads their output back
from the tool results. The conversation is the only state: every request is answered afresh from it.
"""

from __future__ import annotations

import fnmatch
import re
import shlex
import tomllib
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from herdr_sim.agent.packet import (
    ENVELOPE_PREFIX,
    PACKET_PREFIX,
    PROBE_PREFIX,
    Envelope,
    Packet,
    PacketError,
    fill_callback,
    parse_envelope,
    parse_packet,
    parse_probe,
)
from herdr_sim.agent.result import Check, format_result
from herdr_sim.model.conversation import Conversation, ToolCall, ToolResult, UserText
from herdr_sim.model.wire import Call, Reply

BRAINS = ("worker", "question", "blocked", "false-claim", "silent", "slow", "report")
# slow: the steps of a long build, one line every half second, before the work (a turn that prints as it goes).
SLOW_LINES = 40
SLOW_PAUSE_S = 0.5
# report: a Markdown report this many lines long, written where the packet lets reports go, its path sent.
REPORT_LINES = 2000
SHELL_TOOLS = ("Bash", "bash", "exec_command", "shell", "local_shell", "run_shell_command")
EXIT_MARK = re.compile(r"\[orch-exit (\d+)\]")
COMMIT_MARK = re.compile(r"COMMIT=([0-9a-f]{40})")
BEGIN_MARK = "[orch-output]"
SIDE_REPLY = "OK."  # a title request, a quota probe, chat without a packet: a short answer, no tools
DONE_TEXT = "I sent my {kind} to the controller with the packet's callback command; my turn ends here."


class BrainError(ValueError):
    """A brains file that cannot be read; str() is one line."""


@dataclass(frozen=True)
class Spec:
    """Which brain a task gets, and its words (the question it asks, the reason it is blocked)."""

    brain: str = "worker"
    question: str = "Is there anything about the deliverable I should know before I start?"
    reason: str = "I need a person's permission to change files outside my claim."


def load_brains(path: Path | None) -> dict[str, Spec]:
    """`[task.<label>] brain = "question"; question = "…"` per task; a task not listed gets the worker brain."""
    if path is None or not path.exists():
        return {}
    try:
        data = tomllib.loads(path.read_text())
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise BrainError(f"cannot read brains file {path}: {exc}") from None
    specs = {}
    for label, table in (data.get("task") or {}).items():
        unknown = set(table) - {"brain", "question", "reason"}
        if unknown or table.get("brain", "worker") not in BRAINS:
            raise BrainError(f"brains file {path}: task {label}: unknown key or brain ({sorted(unknown) or table.get('brain')})")
        specs[label] = Spec(**table)
    return specs


@dataclass(frozen=True)
class Prompt:
    """A turn's opening: the packet (index 0), an envelope from the controller, or orch doctor's probe."""

    index: int  # position in the conversation's items
    text: str
    kind: str  # "packet", "envelope" or "probe"


def _prompts(conv: Conversation) -> list[Prompt]:
    found = []
    for index, item in enumerate(conv.items):
        if not isinstance(item, UserText):
            continue
        for prefix, kind in ((PACKET_PREFIX, "packet"), (PROBE_PREFIX, "probe")):
            at = item.text.find(prefix)
            if at == 0 or (at > 0 and item.text[at - 1] == "\n"):
                found.append(Prompt(index, item.text[at:], kind))
                break
        else:
            lines = item.text.splitlines()
            start = next((i for i, line in enumerate(lines) if line.lstrip().startswith(ENVELOPE_PREFIX)), None)
            if start is not None:
                found.append(Prompt(index, "\n".join(lines[start:]), "envelope"))
    return found


def task_of(conv: Conversation) -> str | None:
    """The task label of the packet in this conversation, if there is one."""
    first = next((p for p in _prompts(conv) if p.kind == "packet"), None)
    if first is None:
        return None
    head = first.text.split("\n", 1)[0]
    match = re.match(r"Delegation packet for task (\S+) ", head)
    return match.group(1) if match else None


# --- what a careful worker writes, from the packet alone ---


def _claimed(path: str, claim: tuple[str, ...]) -> bool:
    for pattern in claim:
        if pattern.endswith("/") and path.startswith(pattern):
            return True
        if fnmatch.fnmatchcase(path, pattern) or fnmatch.fnmatchcase(path, pattern.rstrip("/") + "/**"):
            return True
    return False


def target_files(packet: Packet) -> list[str]:
    """The files to write: paths the deliverable and scope name inside the claim, else the claim's own file paths."""
    words = re.findall(r"[\w.-]+(?:/[\w.-]+)+|[\w-]+\.[A-Za-z]{1,4}\b", " ".join((packet.deliverable, *packet.scope)))
    named = [w.rstrip(".") for w in words]
    files = [w for w in dict.fromkeys(named) if "." in PurePosixPath(w).name and _claimed(w, packet.file_claim)]
    if not files:
        files = [p for p in packet.file_claim if not any(ch in p for ch in "*?[") and not p.endswith("/")]
    if not files:
        first = packet.file_claim[0].split("*")[0].rstrip("/") if packet.file_claim else "."
        files = [f"{first}/NOTES.md"]
    return files


def _literals(packet: Packet, path: str) -> list[str]:
    """Texts the verification greps for in this file: a worker who read `grep -q 'X' FILE` writes X into FILE."""
    found = []
    for command in packet.verification:
        try:
            argv = shlex.split(command)
        except ValueError:
            continue
        if not argv or argv[0] != "grep":
            continue
        args = [a for a in argv[1:] if not a.startswith("-")]
        if len(args) >= 2 and path in args[1:]:
            found.append(args[0])
    return found


def file_text(packet: Packet, path: str, notes: list[str]) -> str:
    """Content for one claimed file, shaped by its type: a passing unittest, a documented module, or prose."""
    name = PurePosixPath(path).name
    said = [*_literals(packet, path), *notes]
    if name.endswith(".py") and name.startswith("test_"):
        cls = "".join(part.title() for part in re.split(r"[^A-Za-z0-9]+", name[5:-3]) if part) or "Task"
        return (f'"""Tests for task {packet.task_label}: {packet.objective.splitlines()[0]}"""\n\nimport unittest\n\n\n'
                f"class {cls}Test(unittest.TestCase):\n    def test_deliverable_is_present(self) -> None:\n"
                f"        self.assertTrue(True)\n")
    if name.endswith(".py"):
        lines = [f'"""{packet.objective.splitlines()[0]}"""', ""]
        lines += [f"# {note}" for note in said]
        return "\n".join(lines) + "\n"
    title = packet.deliverable.splitlines()[0]
    body = [f"# {title}", "", packet.objective, ""]
    body += [f"{note}" for note in said]
    return "\n".join(body).rstrip("\n") + "\n"


def work_command(packet: Packet, notes: list[str]) -> tuple[list[str], str]:
    """The files and one shell command that writes them, commits them by path with the trailer, and prints the commit."""
    files = target_files(packet)
    parts = [f"cd {shlex.quote(packet.working_directory)}"]
    for path in files:
        parent = str(PurePosixPath(path).parent)
        if parent != ".":
            parts.append(f"mkdir -p {shlex.quote(parent)}")
        parts.append(f"printf '%s' {shlex.quote(file_text(packet, path, notes))} > {shlex.quote(path)}")
    paths = " ".join(shlex.quote(p) for p in files)
    subject = f"{packet.task_label}: {packet.deliverable.splitlines()[0]}"[:72]
    trailer = f" -m {shlex.quote(packet.commit_trailer)}" if packet.commit_trailer else ""
    # A sibling sharing the checkout may hold the index lock, or write the index back without what this worker
    # staged: stage and commit again a few times, as a careful worker would after reading git's error.
    commit = (f"for try in 1 2 3 4 5 6 7 8; do git add -- {paths} && git commit -q -m {shlex.quote(subject)}{trailer} -- {paths} "
              f"&& break; sleep 1; done")
    parts += [commit, f"git log -1 --format=COMMIT=%H -- {paths}"]
    return files, " && ".join(parts[:-2]) + f" && {{ {parts[-2]}; }} ; {parts[-1]}"


def verify_command(packet: Packet, command: str) -> str:
    """One verification command run from the working directory, its output and exit status marked for reading back."""
    return f"cd {shlex.quote(packet.working_directory)} && echo {shlex.quote(BEGIN_MARK)} && ( {command} ) 2>&1; echo \"[orch-exit $?]\""


def read_check(command: str, output: str | None) -> Check:
    """What one verification did, read from its tool result (no result or no exit mark: it did not run to the end)."""
    if output is None:
        return Check(command, 1, "no output: the command did not run")
    exits = EXIT_MARK.findall(output)
    body = output.split(BEGIN_MARK, 1)[1] if BEGIN_MARK in output else output
    body = EXIT_MARK.split(body, 1)[0]
    return Check(command, int(exits[-1]) if exits else 1, body.strip("\n"))


def slow_command(packet: Packet) -> str:
    """A long build that prints as it goes: SLOW_LINES lines, SLOW_PAUSE_S apart."""
    return (f"cd {shlex.quote(packet.working_directory)} && for i in $(seq 1 {SLOW_LINES}); do "
            f"echo \"build step $i of {SLOW_LINES}: compiling module $i, linking, checking its tests (slow and verbose on purpose)\"; "
            f"sleep {SLOW_PAUSE_S:g}; done")


REPORT_MARK = "[orch-report-written]"


def report_path(packet: Packet) -> str:
    assert packet.report_dir is not None
    return str(PurePosixPath(packet.report_dir) / f"{packet.task_label}-report.md")


def report_command(packet: Packet) -> str:
    """Write a large Markdown report (REPORT_LINES lines) where the packet lets reports go, then mark it written."""
    path = shlex.quote(report_path(packet))
    title = shlex.quote(f"# Report for task {packet.task_label}")
    return (f"mkdir -p {shlex.quote(str(packet.report_dir))} && {{ echo {title}; echo; for i in $(seq 1 {REPORT_LINES}); do "
            f"echo \"- finding $i: the deliverable was checked against requirement $i, and it holds\"; done; }} > {path} "
            f"&& wc -l {path} && echo {shlex.quote(REPORT_MARK)}")


# --- turns ---


@dataclass(frozen=True)
class Turn:
    """The current turn: what opened it, the packet, any answers so far, and the tool calls made since it opened."""

    prompt: Prompt
    packet: Packet | None
    answers: tuple[str, ...]
    calls: tuple[ToolCall, ...]
    results: Mapping[str, str]

    def output(self, n: int) -> str | None:
        return self.results.get(self.calls[n].call_id) if n < len(self.calls) else None


def read_turn(conv: Conversation) -> Turn | None:
    """The turn the conversation is in (None: no packet, envelope or probe in it: a side request or plain chat)."""
    prompts = _prompts(conv)
    if not prompts:
        return None
    current = prompts[-1]
    packet = None
    answers = []
    for prompt in prompts:
        if prompt.kind == "packet":
            try:
                packet = parse_packet(prompt.text)
            except PacketError:
                packet = None
            answers = []
        elif prompt.kind == "envelope":
            try:
                envelope = parse_envelope(prompt.text)
            except PacketError:
                continue
            if envelope.kind in ("answer", "follow-up"):
                answers.append(envelope.body)
    after = conv.items[current.index + 1 :]
    calls = tuple(item for item in after if isinstance(item, ToolCall))
    results = {item.call_id: item.text for item in after if isinstance(item, ToolResult)}
    return Turn(current, packet, tuple(answers), calls, results)


class Brain:
    """Answers one request: the next tool call of the current turn's plan, or the text that ends the turn."""

    def __init__(self, specs: Mapping[str, Spec] | None = None) -> None:
        self.specs = dict(specs or {})

    def spec(self, conv: Conversation) -> Spec:
        task = task_of(conv)
        return self.specs.get(task, Spec()) if task else Spec()

    def respond(self, conv: Conversation) -> Reply:
        """The reply to this request, from the conversation alone."""
        turn = read_turn(conv)
        tool = _shell_tool(conv)
        if turn is None or tool is None:
            return Reply(text=SIDE_REPLY)
        if turn.prompt.kind == "probe":
            return self._probe(conv, turn)
        if turn.packet is None:
            return Reply(text="I cannot read this packet, so I will not act on it.")
        spec = self.spec(conv)
        steps = self._plan(spec, turn)
        n = len(turn.calls)
        if n < len(steps):
            step = steps[n]
            if callable(step):
                step = step(turn)
            return Reply(text="", calls=(_call(conv, step),))
        last = _callback_kind(steps[-1]) if steps else None
        return Reply(text=DONE_TEXT.format(kind=last) if last else "I read the task; I am leaving it here.")

    def _plan(self, spec: Spec, turn: Turn) -> list[object]:
        packet = turn.packet
        assert packet is not None
        envelope = _envelope(turn.prompt)
        if envelope is not None and envelope.kind == "stop" or spec.brain == "silent":
            return []  # silent: never a tool call or a callback, whatever the controller asks
        if turn.prompt.kind == "packet":
            if spec.brain == "slow":
                return [slow_command(packet), *self._work(packet, [])]
            if spec.brain == "report" and packet.report_dir:
                return self._work(packet, [], report=True)
            if spec.brain == "question":
                return [fill_callback(packet.callback, "question", spec.question)]
            if spec.brain == "blocked":
                return [fill_callback(packet.callback, "blocked", spec.reason)]
            if spec.brain == "false-claim":
                checks = [Check(c, 0, "OK") for c in packet.verification]
                body = format_result(status="done", commits=[], changed_files=target_files(packet), checks=checks,
                                     report=None, residual_risk="none")
                return [fill_callback(packet.callback, "result", body)]
        elif envelope is None or envelope.kind not in ("answer", "follow-up"):
            return []
        return self._work(packet, list(turn.answers))

    def _work(self, packet: Packet, notes: list[str], *, report: bool = False) -> list[object]:
        files, work = work_command(packet, notes)
        verifies = [verify_command(packet, c) for c in packet.verification]
        written = [report_command(packet)] if report and packet.report_dir else []

        def result(turn: Turn) -> str:
            # The turn's calls: any before the work (slow's build), the work, the checks, the report.
            first = len(turn.calls) - len(written) - len(verifies) - 1
            made = COMMIT_MARK.findall(turn.output(first) or "")
            checks = [read_check(c, turn.output(first + 1 + i)) for i, c in enumerate(packet.verification)]
            path = report_path(packet) if written and REPORT_MARK in (turn.output(first + 1 + len(verifies)) or "") else None
            ok = made and all(c.exit_code == 0 for c in checks)
            body = format_result(status="done" if ok else "partial", commits=made[-1:], changed_files=files if made else [],
                                 checks=checks, report=path, residual_risk="none" if ok else "a check failed or nothing was committed")
            return fill_callback(packet.callback, "result", body)

        return [work, *verifies, *written, result]

    def _probe(self, conv: Conversation, turn: Turn) -> Reply:
        try:
            probe = parse_probe(turn.prompt.text)
        except PacketError:
            return Reply(text="I cannot read this probe.")
        if turn.calls:
            return Reply(text=DONE_TEXT.format(kind=probe.kind))
        return Reply(calls=(_call(conv, fill_callback(probe.callback, probe.kind, probe.message)),))


def _envelope(prompt: Prompt) -> Envelope | None:
    if prompt.kind != "envelope":
        return None
    try:
        return parse_envelope(prompt.text)
    except PacketError:
        return None


def _callback_kind(step: object) -> str | None:
    if callable(step):
        return "result"
    match = re.search(r"kind=([a-z-]+)", str(step))
    return match.group(1) if match else None


def _shell_tool(conv: Conversation) -> str | None:
    names = {tool.name for tool in conv.tools}
    return next((name for name in SHELL_TOOLS if name in names), None)


def _call(conv: Conversation, command: str) -> Call:
    """A call of the agent's shell tool running ``command``, its arguments shaped by the tool's own schema."""
    name = _shell_tool(conv)
    assert name is not None
    schema = next(tool.schema for tool in conv.tools if tool.name == name)
    props = schema.get("properties") or {}
    key = "cmd" if "cmd" in props and "command" not in props else "command"
    value: object = command
    if (props.get(key) or {}).get("type") == "array":
        value = ["bash", "-lc", command]
    args: dict[str, object] = {key: value}
    if "description" in props:
        args["description"] = "Run a step of the delegated task"
    if "sandbox_permissions" in props and not re.search(r"approval policy is currently never", conv.system, re.IGNORECASE):
        # codex in a sandbox that may ask: a commit writes .git and the callback reaches outside the checkout, so a
        # careful worker asks to run its steps unsandboxed (the person approves at codex's own form).
        args["sandbox_permissions"] = "require_escalated"
        if "justification" in props:
            args["justification"] = "Commit my claimed files and report to the controller (both need to write outside the sandbox)"
    prefix = "toolu_" if conv.protocol == "anthropic" else "call_"
    return Call(f"{prefix}{uuid.uuid4().hex[:24]}", name, args)
