"""Packet -> text and back: the deterministic delegation packet format shared with the worker agents that read it."""

from __future__ import annotations

import re
import shlex

from packets.errors import PacketSyntaxError
from packets.model import Packet, describe, problems
from packets.result import RESULT_FORMAT

TITLE_PREFIX = "Delegation packet for task "
CLAIM_INTRO = "You may create or change only these paths (glob patterns, relative to the working directory):"
# An empty claim: the whole section is this one line.
READ_ONLY_CLAIM = "None: this task is read-only. Do not create, change or delete any file, and make no commits."
# Attribution: siblings share one checkout and branch, so each commit says whose it is (orchestrator.evidence reads it).
COMMIT_TRAILER_KEY = "Orch-Task"
COMMIT_RULE = (
    "Commit only files you changed yourself, naming them in the commit (`git commit -m \"…\" -- FILE…`; never "
    "`git add -A`, `git add .`, `git commit -a` or a `git commit` without paths: another worker may share this checkout and "
    "have staged its own files), and end every commit message with the trailer line `" + COMMIT_TRAILER_KEY + ": {task}`. "
    "Commits are attributed to workers by that trailer; on a shared branch a commit without it fails verification."
)


def commit_rule(task: str) -> str:
    """The File claim's commit rule for one task (the trailer names the task label)."""
    return COMMIT_RULE.format(task=task)
VERIFICATION_INTRO = "Run each command from the working directory and paste its real output in your result:"
STOP_INTRO = "Stop, send a `blocked` message and end your turn when:"
# The rules a worker needs to use the callback correctly; fixed text, so the parser re-checks it verbatim.
CONTRACT_RULES = (
    "Talk to the controller only through the command below, one message per call. "
    "Kinds: `update` at a meaningful checkpoint (keep working, expect no reply); "
    "`question` when the controller can answer from the task context; "
    "`blocked` when user authority, authentication, permission or a scope decision is needed; "
    "`result` when the task is finished.\n"
    "After `question` or `blocked`, end your turn and wait: the controller replies with `answer`, `follow-up` or `stop` "
    "in the same envelope format, with this run ID and task label.\n"
    "A `result` lists your commits, the changed files, every check you ran with its real exit code and output, "
    "the residual risk and the paths of any reports, in the format below; then end your turn. "
    "The controller verifies every claim."
)
# Fixed text after the limit line (which names this packet's limit and report directory).
CONTRACT_RULES_TAIL = (
    "Write plain text only: escape sequences, control and invisible characters, "
    "or a line that looks like a message header, get a message kept aside unread.\n"
    "Send without `--wait`. Exit status 0 means the message was submitted, not read or accepted: never resend after success. "
    "On a non-zero exit, keep the exact error in your final response and do not retry in a loop."
)
RESULT_INTRO = (
    "A `result` message has these lines, in any order: replace the words in capitals, leave out the notes in brackets. "
    "A line the controller cannot read is reported as unreadable, never guessed."
)
SEND_INTRO = (
    "Send every message with exactly this command, replacing <kind> with update, question, blocked or result "
    'and <message> with your message (escape \\, ", $ and ` inside it, since it sits in double quotes):'
)
_ENVELOPE_START = ' "[herdr-orchestration run='
_LIMIT_RE = re.compile(
    r"Messages over (?P<limit>[0-9]+) bytes are kept aside unread: put logs, diffs and anything large in a Markdown report "
    r"inside your working directory(?: or (?P<dir>/.*?))?, and send its absolute path on a `Report:` line; "
    r"a report path anywhere else is kept aside\."
)


def limit_line(packet: Packet) -> str:
    """The rule that names the packet's message limit and the places the worker may write reports."""
    where = f"your working directory or {packet.report_dir}" if packet.report_dir else "your working directory"
    return (
        f"Messages over {packet.message_limit} bytes are kept aside unread: put logs, diffs and anything large in a Markdown report "
        f"inside {where}, and send its absolute path on a `Report:` line; a report path anywhere else is kept aside."
    )


def _bullets(items: tuple[str, ...]) -> list[str]:
    return [f"- {item}" for item in items]


def render_packet(packet: Packet) -> str:
    """Render a packet as the exact text a worker receives (`\\n` endings, one trailing newline)."""
    p = packet
    prefix = shlex.join(p.callback_prefix)
    header = (
        f"[herdr-orchestration run={p.run_id} task={p.task_label} from={p.worker_name} kind=<kind> reply-to={p.worker_target}]"
    )
    lines = [
        f"{TITLE_PREFIX}{p.task_label} (run {p.run_id})",
        "",
        f"Run ID: {p.run_id}",
        f"Task label: {p.task_label}",
        f"Worker name: {p.worker_name}",
        f"Worker target: {p.worker_target}",
        f"Controller target: {p.controller_target}",
        f"Worker kind: {p.worker_kind}",
        f"Repository: {p.repo_path}",
        f"Working directory: {p.workdir}",
        f"Branch: {p.branch}",
        f"Base: {p.base_ref} at {p.base_sha}",
        f"Execution mode: {p.execution_mode}",
        "",
        "## Objective",
        p.objective,
        "",
        "## Deliverable",
        p.deliverable,
        "",
        "## Scope",
        *_bullets(p.scope),
        "",
        "## Exclusions",
        *(_bullets(p.exclusions) if p.exclusions else ["- none"]),
        "",
        "## File claim",
        *([CLAIM_INTRO, *_bullets(p.file_claim), "", commit_rule(p.task_label)] if p.file_claim else [READ_ONLY_CLAIM]),
        "",
        "## Evidence required",
        *_bullets(p.evidence),
        "",
        "## Verification",
        VERIFICATION_INTRO,
        *[f"- `{command}`" for command in p.verification],
        "",
        "## Stop conditions",
        STOP_INTRO,
        *_bullets(p.stop_conditions),
        "",
    ]
    if p.context_files:
        lines += ["## Context files", *_bullets(p.context_files), ""]
    lines += [
        "## Message Contract",
        CONTRACT_RULES,
        limit_line(p),
        CONTRACT_RULES_TAIL,
        RESULT_INTRO,
        "",
        "```text",
        *RESULT_FORMAT,
        "```",
        "",
        SEND_INTRO,
        "",
        "```sh",
        f'{prefix} "{header}',
        '<message>"',
        "```",
    ]
    return "\n".join(lines) + "\n"


class _Reader:
    """A cursor over packet lines that reports the 1-based line number of whatever it did not expect."""

    def __init__(self, text: str) -> None:
        self.lines = text.split("\n")
        self.index = 0
        # 1-based line where each value starts, so a bad value is reported where it is written.
        self.where: dict[str, int] = {}

    def mark(self, name: str) -> None:
        self.where[name] = self.index + 1

    def fail(self, reason: str) -> PacketSyntaxError:
        return PacketSyntaxError(self.index + 1, reason)

    def peek(self) -> str | None:
        return self.lines[self.index] if self.index < len(self.lines) else None

    def take(self) -> str:
        line = self.peek()
        if line is None:
            raise self.fail("unexpected end of packet")
        self.index += 1
        return line

    def expect(self, wanted: str) -> None:
        line = self.take()
        if line != wanted:
            self.index -= 1
            raise self.fail(f"expected {wanted!r}, found {line!r}")

    def field(self, name: str) -> str:
        line = self.take()
        if not line.startswith(f"{name}: "):
            self.index -= 1
            raise self.fail(f"expected {name + ':'!r} line, found {line!r}")
        return line[len(name) + 2 :]

    def block(self, next_heading: str) -> str:
        """Free text up to (not including) the blank line before `next_heading`."""
        start = self.index
        while self.index + 1 < len(self.lines) and not (
            self.lines[self.index] == "" and self.lines[self.index + 1] == next_heading
        ):
            self.index += 1
        if self.index + 1 >= len(self.lines):
            self.index = start
            raise self.fail(f"section is not followed by {next_heading!r}")
        text = "\n".join(self.lines[start : self.index])
        self.index += 1
        return text

    def bullets(self) -> tuple[str, ...]:
        items: list[str] = []
        while (line := self.peek()) is not None and line != "":
            if not line.startswith("- "):
                raise self.fail(f"expected a '- ' bullet, found {line!r}")
            items.append(line[2:])
            self.index += 1
        if not items:
            raise self.fail("expected at least one '- ' bullet")
        self.expect("")
        return tuple(items)


def parse_packet(text: str) -> Packet:
    """Parse rendered packet text back into a Packet; anything render_packet would not produce is a PacketSyntaxError."""
    r = _Reader(text)
    title = r.take()
    match = re.fullmatch(re.escape(TITLE_PREFIX) + r"(\S+) \(run (\S+)\)", title)
    if not match:
        r.index -= 1
        raise r.fail(f"expected '{TITLE_PREFIX}<task-label> (run <run-id>)', found {title!r}")
    r.expect("")
    fields: dict[str, object] = {}
    for name, label in (
        ("run_id", "Run ID"),
        ("task_label", "Task label"),
        ("worker_name", "Worker name"),
        ("worker_target", "Worker target"),
        ("controller_target", "Controller target"),
        ("worker_kind", "Worker kind"),
        ("repo_path", "Repository"),
        ("workdir", "Working directory"),
        ("branch", "Branch"),
    ):
        r.mark(name)
        fields[name] = r.field(label)
    for name in ("base_ref", "base_sha"):
        r.mark(name)
    base = r.field("Base")
    base_ref, sep, base_sha = base.rpartition(" at ")
    if not sep:
        r.index -= 1
        raise r.fail(f"expected 'Base: <ref> at <sha>', found {base!r}")
    r.mark("execution_mode")
    fields.update(base_ref=base_ref, base_sha=base_sha, execution_mode=r.field("Execution mode"))
    r.expect("")
    r.expect("## Objective")
    r.mark("objective")
    fields["objective"] = r.block("## Deliverable")
    r.expect("## Deliverable")
    r.mark("deliverable")
    fields["deliverable"] = r.block("## Scope")
    r.expect("## Scope")
    r.mark("scope")
    fields["scope"] = r.bullets()
    r.expect("## Exclusions")
    r.mark("exclusions")
    exclusions = r.bullets()
    fields["exclusions"] = () if exclusions == ("none",) else exclusions
    r.expect("## File claim")
    r.mark("file_claim")
    if r.peek() == READ_ONLY_CLAIM:
        r.take()
        r.expect("")
        fields["file_claim"] = ()
    else:
        r.expect(CLAIM_INTRO)
        r.mark("file_claim")
        fields["file_claim"] = r.bullets()
        r.take()  # the commit rule names the task label: checked with the whole rendering below
        r.expect("")
    r.expect("## Evidence required")
    r.mark("evidence")
    fields["evidence"] = r.bullets()
    r.expect("## Verification")
    r.expect(VERIFICATION_INTRO)
    start = r.index
    r.mark("verification")
    commands = r.bullets()
    for offset, command in enumerate(commands):
        if not (len(command) >= 2 and command.startswith("`") and command.endswith("`")):
            raise PacketSyntaxError(start + offset + 1, f"expected '- `<command>`', found {'- ' + command!r}")
    fields["verification"] = tuple(command[1:-1] for command in commands)
    r.expect("## Stop conditions")
    r.expect(STOP_INTRO)
    r.mark("stop_conditions")
    fields["stop_conditions"] = r.bullets()
    if r.peek() == "## Context files":
        r.take()
        r.mark("context_files")
        fields["context_files"] = r.bullets()
    r.expect("## Message Contract")
    for line in CONTRACT_RULES.split("\n"):
        r.expect(line)
    r.mark("message_limit")
    limits = _LIMIT_RE.fullmatch(r.take())
    if limits is None:
        r.index -= 1
        raise r.fail(f"expected 'Messages over <n> bytes are kept aside unread: …', found {r.peek()!r}")
    fields["message_limit"] = int(limits["limit"])
    if limits["dir"]:
        fields["report_dir"] = limits["dir"]
    for line in (*CONTRACT_RULES_TAIL.split("\n"), RESULT_INTRO, "", "```text", *RESULT_FORMAT, "```", "", SEND_INTRO, "", "```sh"):
        r.expect(line)
    r.mark("callback_prefix")
    command = r.take()
    cut = command.rfind(_ENVELOPE_START)
    if cut <= 0:
        r.index -= 1
        raise r.fail(f"expected '<callback command> \"[herdr-orchestration run=…', found {command!r}")
    try:
        fields["callback_prefix"] = tuple(shlex.split(command[:cut]))
    except ValueError as error:
        r.index -= 1
        raise r.fail(f"callback command is not valid shell words: {error}") from None
    values, found = problems(fields)
    if found:
        raise PacketSyntaxError(r.where.get(found[0][0], r.index), describe(found, "packet value"))
    packet = Packet(**values)
    # Everything else (title, callback header, closing lines) is derived from the fields: compare the whole rendering.
    canonical = render_packet(packet).split("\n")
    for number, (got, want) in enumerate(zip(text.split("\n"), canonical, strict=False), start=1):
        if got != want:
            raise PacketSyntaxError(number, f"expected {want!r}, found {got!r}")
    if len(text.split("\n")) != len(canonical):
        raise PacketSyntaxError(min(len(canonical), len(text.split("\n"))), "packet does not end where the format ends (one trailing newline)")
    return packet
