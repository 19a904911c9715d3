"""The Message Contract envelope: one strict header line plus a body, parsed from terminal text into one record; pure (no pydantic)."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Literal, NamedTuple

from packets.errors import EnvelopeError, PacketError
from registry.kinds import CONTROLLER_KINDS, WORKER_KINDS, ControllerKind, MessageKind

__all__ = [
    "CONTROLLER_KINDS", "DEFAULT_MESSAGE_LIMIT", "ENVELOPE_PREFIX", "HEADER_KEYS", "MESSAGE_LIMIT_RANGE", "PACKET_PREFIX", "PASTE_END",
    "PASTE_START", "WORKER_KINDS", "ControllerKind", "Header", "Message", "MessageKind", "build_controller_message", "check_task_label",
    "check_token", "classify_prompt", "headers_in", "normalise", "parse_message", "render_message",
]  # fmt: skip

ENVELOPE_PREFIX = "[herdr-orchestration "
PACKET_PREFIX = "Delegation packet for task "
HEADER_KEYS: tuple[str, ...] = ("run", "task", "from", "kind", "reply-to")
# The inbound size limit, in UTF-8 bytes of the whole message as received; plans and policies may set another.
DEFAULT_MESSAGE_LIMIT = 64 * 1024
MESSAGE_LIMIT_RANGE = (1024, 1024 * 1024)

# What a terminal adds around pasted text: one bracketed-paste pair (herdr pastes prompts that way when the app asks).
PASTE_START, PASTE_END = "\x1b[200~", "\x1b[201~"
_BLANK = " \t\r\n"
_VALUE_CHAR_RE = re.compile(r"[!-\\^-~]")  # printable ASCII except space and "]"


def _unwrap_paste(raw: str) -> str:
    # Only the pair wrapping the whole text is the terminal's; a marker anywhere else is the sender's own text.
    text = raw.lstrip(_BLANK)
    text = text[len(PASTE_START) :] if text.startswith(PASTE_START) else raw
    end = text.rstrip(_BLANK)
    return end[: -len(PASTE_END)] if end.endswith(PASTE_END) else text


def _tidy(text: str) -> str:
    lines = [line.rstrip(" ") for line in text.replace("\r\n", "\n").replace("\r", "\n").split("\n")]
    while lines and lines[0] == "":
        lines.pop(0)
    while lines and lines[-1] == "":
        lines.pop()
    return "\n".join(lines)


def normalise(raw: str) -> str:
    """Undo what a terminal adds: one wrapping paste-marker pair, CR/LF or CR endings, trailing spaces, surrounding blank lines."""
    return _tidy(_unwrap_paste(raw))


def classify_prompt(raw: str) -> Literal["envelope", "packet", "other"]:
    """Tell an envelope from a delegation packet by its first non-blank line, as workers must."""
    first = normalise(raw).split("\n", 1)[0]
    if first.startswith(ENVELOPE_PREFIX):
        return "envelope"
    if first.startswith(PACKET_PREFIX):
        return "packet"
    return "other"


def _show(text: str, limit: int = 60) -> str:
    shown = text if len(text) <= limit else text[:limit] + "…"
    return json.dumps(shown, ensure_ascii=False)


def _found(part: str) -> str:
    if part == "":
        return "an extra space"
    name, eq, _ = part.partition("=")
    return _show(name if eq else part)


def _parse_header(line: str) -> dict[str, str]:
    if not line.startswith(ENVELOPE_PREFIX):
        raise EnvelopeError(f"malformed header: the first line must start with {_show(ENVELOPE_PREFIX)}, found {_show(line)}")
    close = line.find("]")
    if close == -1:
        raise EnvelopeError('malformed header: missing the closing "]"')
    if close != len(line) - 1:
        raise EnvelopeError(f'malformed header: unexpected {_show(line[close + 1 :])} after the closing "]" (the body starts on the next line)')
    parts = line[len(ENVELOPE_PREFIX) : close].split(" ")
    values: dict[str, str] = {}
    previous = '"[herdr-orchestration"'
    for index, key in enumerate(HEADER_KEYS):
        if index >= len(parts):
            raise EnvelopeError(f'malformed header: expected key "{key}" after {previous}, found the end of the header')
        part = parts[index]
        name, eq, value = part.partition("=")
        if name != key or not eq:
            raise EnvelopeError(f'malformed header: expected key "{key}" after {previous}, found {_found(part)}')
        if not value:
            raise EnvelopeError(f'malformed header: empty value for key "{key}"')
        bad = next((char for char in value if not _VALUE_CHAR_RE.fullmatch(char)), None)
        if bad is not None:
            raise EnvelopeError(f'malformed header: value of key "{key}" contains {_show(bad)} (values are printable ASCII without spaces)')
        values[key] = value
        previous = part
    if len(parts) > len(HEADER_KEYS):
        extra = parts[len(HEADER_KEYS)]
        raise EnvelopeError(f"malformed header: unexpected {_show(extra) if extra else 'an extra space'} after {previous}")
    if values["kind"] not in WORKER_KINDS + CONTROLLER_KINDS:
        raise EnvelopeError(
            f'malformed header: unknown kind {_show(values["kind"])} (expected one of {", ".join(WORKER_KINDS + CONTROLLER_KINDS)})'
        )
    return values


# Patterns off a callback's path are left to re's own cache (compiled on first use): a callback pays no start-up for them.
_TOKEN = r"[A-Za-z0-9][A-Za-z0-9._:@+/-]{0,127}"
_TASK_LABEL = r"[a-z0-9]+(?:-[a-z0-9]+)*"


def check_token(value: str) -> str:
    """Run ids and herdr targets are inlined in a double-quoted shell argument and in the envelope header."""
    if not re.fullmatch(_TOKEN, value):
        raise ValueError(
            f"{value!r} must be 1-128 characters from A-Z a-z 0-9 . _ : @ + / -, starting with a letter or digit"
            " (no whitespace, quotes or shell metacharacters)"
        )
    return value


def check_task_label(value: str) -> str:
    """A task label is lowercase hyphen-case, as the spec requires."""
    if len(value) > 64 or not re.fullmatch(_TASK_LABEL, value):
        raise ValueError(f"{value!r} must be lowercase hyphen-case (a-z, 0-9 and single inner hyphens, at most 64 characters)")
    return value


# A well-formed header anywhere in a text (mid-line too): how two callbacks typed into one prompt look (herdr 0.8.2
# writes a prompt's Enter 300 ms after its text, so a second callback can be typed before the first is submitted).
_HEADER_ANYWHERE = (
    r"\[herdr-orchestration run=(?P<run>[!-\\^-~]+) task=(?P<task>[!-\\^-~]+) from=(?P<sender>[!-\\^-~]+)"
    r" kind=(?P<kind>update|question|blocked|result|answer|follow-up|stop) reply-to=(?P<reply_to>[!-\\^-~]+)\]"
)



@dataclass(frozen=True)
class Message:
    """One parsed envelope: header fields plus the body, both normalised (the one envelope record; `parse_message` fills it)."""

    run_id: str
    task: str
    sender: str
    kind: MessageKind
    reply_to: str
    body: str

    def header(self) -> str:
        """The header line exactly as the grammar requires it."""
        return (
            f"{ENVELOPE_PREFIX}run={self.run_id} task={self.task} from={self.sender}"
            f" kind={self.kind} reply-to={self.reply_to}]"
        )


class Header(NamedTuple):
    """One header's fields as written; a header found inside a text says only who it names, never that they sent it.

    A named tuple, not a dataclass: it is off a callback's path, and a dataclass costs each callback ~0.5 ms to define.
    """

    run_id: str
    task: str
    sender: str
    kind: MessageKind
    reply_to: str


def headers_in(text: str) -> tuple[Header, ...]:
    """Every exact, well-formed header in ``text``, at a line start or mid-line, in order (look-alikes are not headers)."""
    return tuple(
        Header(run_id=m["run"], task=m["task"], sender=m["sender"], kind=m["kind"], reply_to=m["reply_to"])  # type: ignore[arg-type]
        for m in re.finditer(_HEADER_ANYWHERE, text)
    )


def parse_message(raw: str) -> Message:
    """Parse raw envelope text as received from a terminal or an inbox; EnvelopeError names the exact problem."""
    text = normalise(raw)
    if not text:
        raise EnvelopeError("malformed header: the message is empty")
    header, _, body = text.partition("\n")
    values = _parse_header(header)
    # A blank line between header and body is terminal noise as much as a leading one.
    return Message(
        run_id=values["run"],
        task=values["task"],
        sender=values["from"],
        kind=values["kind"],  # type: ignore[arg-type]  # checked against the kinds in _parse_header
        reply_to=values["reply-to"],
        body=_tidy(body),
    )


def render_message(message: Message) -> str:
    """The envelope text: header line, newline, body (no trailing newline)."""
    return f"{message.header()}\n{message.body}"


def build_controller_message(*, run_id: str, task_label: str, controller_target: str, kind: ControllerKind, body: str) -> str:
    """Build an answer, follow-up or stop for a worker: from and reply-to are both the controller target."""
    if kind not in CONTROLLER_KINDS:
        raise PacketError(f"invalid controller message: kind {kind!r} is not one of {', '.join(CONTROLLER_KINDS)}")
    try:
        check_token(run_id)
        check_task_label(task_label)
        check_token(controller_target)
    except ValueError as error:
        raise PacketError(f"invalid controller message: {error}") from None
    return render_message(Message(run_id=run_id, task=task_label, sender=controller_target, kind=kind, reply_to=controller_target, body=_tidy(body)))
