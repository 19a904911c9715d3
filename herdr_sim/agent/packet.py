"""Read delegation packets and run-scoped envelopes the way a careful worker would; knows nothing of orch's `packets`."""

from __future__ import annotations

import re

from dataclasses import dataclass

PACKET_FIRST_LINE = re.compile(r"^Delegation packet for task (?P<task>\S+) \(run (?P<run>\S+)\)$")
ENVELOPE_HEADER = re.compile(
    r"^\[herdr-orchestration run=(?P<run>\S+) task=(?P<task>\S+) from=(?P<sender>\S+) kind=(?P<kind>\S+) reply-to=(?P<reply_to>\S+)\]$"
)
ENVELOPE_PREFIX = "[herdr-orchestration "
PACKET_PREFIX = "Delegation packet for task "
# orch doctor's probe: a task whose only step is one message through the Message Contract (docs/simulator.md).
PROBE_FIRST_LINE = re.compile(r"^Probe from orch doctor for task (?P<task>\S+) \(run (?P<run>\S+)\)$")
PROBE_PREFIX = "Probe from orch doctor for task "
PROBE_STEP = re.compile(r"Your only step: send one `(?P<kind>[a-z-]+)` message whose text is exactly `(?P<message>[^`]+)`")

# Header key (as written in the packet) -> field name; every one is required.
_HEADER_KEYS = {
    "Run ID": "run_id",
    "Task label": "task_label",
    "Worker name": "worker_name",
    "Worker target": "worker_target",
    "Controller target": "controller_target",
    "Worker kind": "worker_kind",
    "Repository": "repository",
    "Working directory": "working_directory",
    "Branch": "branch",
    "Base": "base",
    "Execution mode": "execution_mode",
}
_REQUIRED_SECTIONS = (
    "Objective",
    "Deliverable",
    "Scope",
    "Exclusions",
    "File claim",
    "Evidence required",
    "Verification",
    "Stop conditions",
    "Message Contract",
)


class PacketError(Exception):
    """A prompt that claims to be a packet or envelope but cannot be read; str() is one line."""


@dataclass(frozen=True)
class Packet:
    """What a worker needs from its delegation packet."""

    run_id: str
    task_label: str
    worker_name: str
    worker_target: str
    controller_target: str
    worker_kind: str
    repository: str
    working_directory: str
    branch: str
    base_ref: str
    base_sha: str
    execution_mode: str
    objective: str
    deliverable: str
    scope: tuple[str, ...]
    exclusions: tuple[str, ...]
    file_claim: tuple[str, ...]
    evidence: tuple[str, ...]
    verification: tuple[str, ...]
    stop_conditions: tuple[str, ...]
    context_files: tuple[str, ...]
    callback: str
    # The packet's File claim may ask for a commit trailer (`Orch-Task: <task>`); a worker following it adds it.
    commit_trailer: str | None = None
    # Where the packet says reports may go besides the working directory (None when it names no such place).
    report_dir: str | None = None


@dataclass(frozen=True)
class Envelope:
    """A run-scoped message: header fields plus body."""

    run: str
    task: str
    sender: str
    kind: str
    reply_to: str
    body: str


def classify(text: str) -> str:
    """Say what a submitted prompt is: "envelope", "packet" or "chat"."""
    lines = [line for line in text.splitlines() if line.strip()]
    if not lines:
        return "chat"
    if lines[0].lstrip().startswith(ENVELOPE_PREFIX):
        return "envelope"
    if text.lstrip("\n").startswith(PACKET_PREFIX):
        return "packet"
    if text.lstrip("\n").startswith(PROBE_PREFIX):
        return "probe"
    return "chat"


def parse_envelope(text: str) -> Envelope:
    """Parse `[herdr-orchestration …]` + body; the header is the first non-blank line."""
    lines = text.strip("\n").splitlines()
    while lines and not lines[0].strip():
        lines.pop(0)
    if not lines:
        raise PacketError("empty message")
    match = ENVELOPE_HEADER.match(lines[0].strip())
    if match is None:
        raise PacketError(f"malformed envelope header: {lines[0].strip()}")
    return Envelope(**match.groupdict(), body="\n".join(lines[1:]).strip("\n"))


def _split_sections(lines: list[str]) -> tuple[list[str], dict[str, list[str]]]:
    """Cut the packet into header lines and `## ` sections, never splitting inside a ``` fence."""
    header: list[str] = []
    sections: dict[str, list[str]] = {}
    current: list[str] = header
    fenced = False
    for line in lines:
        if line.startswith("```"):
            fenced = not fenced
        if not fenced and line.startswith("## "):
            name = line[3:].strip()
            if name in sections:
                raise PacketError(f"section '## {name}' appears twice")
            current = sections[name] = []
            continue
        current.append(line)
    return header, sections


def _bullets(body: list[str]) -> tuple[str, ...]:
    return tuple(line[2:].strip() for line in body if line.startswith("- "))


def _text(body: list[str]) -> str:
    return "\n".join(body).strip("\n")


def _unquote_command(item: str) -> str:
    # Verification bullets wrap the command in one pair of backticks.
    if len(item) >= 2 and item.startswith("`") and item.endswith("`"):
        return item[1:-1]
    return item


# The Message Contract's rule naming where large content goes: "... inside your working directory or <dir>, and send ...".
_REPORT_DIR = re.compile(r"inside your working directory or (?P<dir>/\S+), and send its absolute path")


def _report_dir(body: list[str]) -> str | None:
    found = next((match for line in body if (match := _REPORT_DIR.search(line))), None)
    return found["dir"] if found else None


def _callback(body: list[str]) -> str:
    start = next((i for i, line in enumerate(body) if line.strip() == "```sh"), None)
    if start is None:
        raise PacketError("Message Contract has no ```sh block")
    end = next((i for i in range(start + 1, len(body)) if body[i].strip() == "```"), None)
    if end is None:
        raise PacketError("Message Contract ```sh block is not closed")
    command = "\n".join(body[start + 1 : end])
    for placeholder in ("<kind>", "<message>"):
        if placeholder not in command:
            raise PacketError(f"callback command has no {placeholder} placeholder")
    return command


def parse_packet(text: str) -> Packet:
    """Read a delegation packet; raise PacketError naming the first thing that is missing or malformed."""
    lines = text.replace("\r\n", "\n").strip("\n").split("\n")
    first = PACKET_FIRST_LINE.match(lines[0].strip())
    if first is None:
        raise PacketError(f"not a delegation packet: {lines[0].strip()}")
    header_lines, sections = _split_sections(lines[1:])
    fields: dict[str, str] = {}
    for line in header_lines:
        if not line.strip():
            continue
        key, sep, value = line.partition(": ")
        if not sep or key not in _HEADER_KEYS:
            raise PacketError(f"unexpected header line: {line}")
        fields[_HEADER_KEYS[key]] = value.strip()
    missing = [key for key, name in _HEADER_KEYS.items() if name not in fields]
    if missing:
        raise PacketError(f"missing header: {missing[0]}")
    absent = [name for name in _REQUIRED_SECTIONS if name not in sections]
    if absent:
        raise PacketError(f"missing section: ## {absent[0]}")
    if (fields["run_id"], fields["task_label"]) != (first["run"], first["task"]):
        raise PacketError("title line and Run ID/Task label disagree")
    base_ref, sep, base_sha = fields.pop("base").rpartition(" at ")
    if not sep:
        raise PacketError("Base must read '<ref> at <sha>'")
    return Packet(
        **fields,
        base_ref=base_ref,
        base_sha=base_sha,
        objective=_text(sections["Objective"]),
        deliverable=_text(sections["Deliverable"]),
        scope=_bullets(sections["Scope"]),
        exclusions=tuple(item for item in _bullets(sections["Exclusions"]) if item != "none"),
        file_claim=_bullets(sections["File claim"]),
        evidence=_bullets(sections["Evidence required"]),
        verification=tuple(_unquote_command(item) for item in _bullets(sections["Verification"])),
        stop_conditions=_bullets(sections["Stop conditions"]),
        context_files=_bullets(sections.get("Context files", [])),
        callback=_callback(sections["Message Contract"]),
        commit_trailer=_trailer(sections["File claim"]),
        report_dir=_report_dir(sections["Message Contract"]),
    )


@dataclass(frozen=True)
class Probe:
    """orch doctor's probe: which run and task, the one message to send, and the command that sends it."""

    run_id: str
    task_label: str
    kind: str
    message: str
    callback: str


def parse_probe(text: str) -> Probe:
    """Read a probe as strictly as a packet: its title, its one step, and a Message Contract ```sh block."""
    lines = text.replace("\r\n", "\n").strip("\n").split("\n")
    first = PROBE_FIRST_LINE.match(lines[0].strip())
    if first is None:
        raise PacketError(f"not a probe: {lines[0].strip()}")
    header, sections = _split_sections(lines[1:])
    step = next((match for line in header if (match := PROBE_STEP.search(line))), None)
    if step is None:
        raise PacketError("the probe names no step (Your only step: send one `<kind>` message whose text is exactly `<text>`)")
    if "Message Contract" not in sections:
        raise PacketError("missing section: ## Message Contract")
    return Probe(run_id=first["run"], task_label=first["task"], kind=step["kind"], message=step["message"], callback=_callback(sections["Message Contract"]))


_TRAILER = re.compile(r"end every commit message with the trailer line `([A-Za-z-]+: [^`]+)`")


def _trailer(body: list[str]) -> str | None:
    found = _TRAILER.search(" ".join(body))
    return found.group(1) if found else None


def escape_for_double_quotes(message: str) -> str:
    """Escape \\, ", $ and ` so the message survives inside a double-quoted shell word."""
    return re.sub(r'([\\"$`])', r"\\\1", message)


def fill_callback(template: str, kind: str, message: str, overrides: dict[str, str] | None = None) -> str:
    """Fill the packet's callback command; overrides rewrite header fields (run, task, from, reply-to) to fake a bad message."""
    command = template
    for key, value in (overrides or {}).items():
        command = re.sub(rf"(?<=[ \[]){re.escape(key)}=\S+?(?=[ \]])", f"{key}={value}", command, count=1)
    # Kind first: the message is free text and may itself contain "<kind>".
    command = command.replace("<kind>", kind, 1)
    return command.replace("<message>", escape_for_double_quotes(message), 1)
