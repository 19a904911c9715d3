"""The delegation packet: every section the spec requires, a frozen dataclass whose values are checked so the rendered text stays parseable and shell-safe."""

from __future__ import annotations

import posixpath
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal, get_args

from packets.errors import PacketError
from packets.envelope import DEFAULT_MESSAGE_LIMIT, MESSAGE_LIMIT_RANGE, check_task_label, check_token

# herdr 0.7.5 `agent start --kind` accepts exactly these (CONTRACT.md §8.4).
AgentKind = Literal[
    "pi", "claude", "codex", "gemini", "cursor", "devin", "agy", "cline", "omp", "mastracode", "opencode",
    "copilot", "kimi", "kiro", "droid", "amp", "grok", "hermes", "kilo", "qodercli", "maki",
]
AGENT_KINDS: tuple[str, ...] = get_args(AgentKind)
ExecutionMode = Literal["direct", "plan-first"]

_WORKER_NAME_RE = re.compile(r"[a-z][a-z0-9_-]{0,31}")
_SHA_RE = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")
_CONTROL_RE = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]")
_REF_FORBIDDEN_RE = re.compile(r"[\s~^:?*\[\\\x00-\x1f\x7f]|\.\.|@\{|//")


def check_worker_name(value: str) -> str:
    """A worker name is a herdr agent name (CONTRACT.md: `[a-z][a-z0-9_-]{0,31}`)."""
    if not _WORKER_NAME_RE.fullmatch(value):
        raise ValueError(f"{value!r} must match [a-z][a-z0-9_-]{{0,31}}")
    return value


def _check_abs_path(value: str) -> str:
    if _CONTROL_RE.search(value) or value != value.strip():
        raise ValueError(f"{value!r} must not contain control characters or surrounding whitespace")
    if not value.startswith("/") or posixpath.normpath(value) != value:
        raise ValueError(f"{value!r} must be an absolute, normalised path")
    return value


def _check_ref(value: str) -> str:
    # A subset of `git check-ref-format`: enough to keep the value on one line and unambiguous in "Base: <ref> at <sha>".
    if (
        not value
        or _REF_FORBIDDEN_RE.search(value)
        or value.startswith(("-", "/", "."))
        or value.endswith(("/", ".", ".lock"))
    ):
        raise ValueError(f"{value!r} is not a valid git ref name")
    return value


def _check_sha(value: str) -> str:
    if not _SHA_RE.fullmatch(value):
        raise ValueError(f"{value!r} must be a full lowercase hex commit id (40 or 64 digits)")
    return value


def _check_text(value: str) -> str:
    # Trailing whitespace is not visible and would not survive a terminal, so normalise it away.
    lines = [line.rstrip() for line in value.strip().split("\n")]
    if not any(lines):
        raise ValueError("must not be empty")
    text = "\n".join(lines)
    if re.search(r"[\x00-\x08\x0b-\x1f\x7f]", text):
        raise ValueError("must not contain control characters other than tab and newline")
    for line in lines:
        if line.startswith("## "):
            raise ValueError(f"line {line!r} looks like a packet section heading; lines starting with '## ' are reserved")
    # Readers skip headings inside code fences, so an unclosed fence would swallow the sections after it.
    if sum(line.startswith("```") for line in lines) % 2:
        raise ValueError("has an unclosed ``` code fence")
    return text


def _check_item(value: str) -> str:
    item = value.strip()
    if not item:
        raise ValueError("list items must not be empty")
    if _CONTROL_RE.search(item):
        raise ValueError(f"list item {item!r} must be one line without control characters")
    return item


def _check_command(value: str) -> str:
    command = _check_item(value)
    if "`" in command:
        raise ValueError(f"verification command {command!r} must not contain a backtick (it is rendered as inline code)")
    return command


def _check_exclusion(value: str) -> str:
    item = _check_item(value)
    if item == "none":
        raise ValueError("the exclusion 'none' is reserved for an empty list; pass no exclusions instead")
    return item


def _check_claim(value: str) -> str:
    pattern = _check_item(value)
    if pattern.startswith("/") or ".." in pattern.split("/"):
        raise ValueError(f"file claim {pattern!r} must be relative to the working directory, without '..'")
    return pattern


def _check_arg(value: str) -> str:
    if not value or _CONTROL_RE.search(value):
        raise ValueError(f"callback argument {value!r} must be non-empty, one line, without control characters")
    return value


def _non_empty(values: tuple[str, ...]) -> tuple[str, ...]:
    if not values:
        raise ValueError("must list at least one item")
    return values


# What each field takes, in the order they are checked and reported: a value of the wrong type is refused as such (no
# coercion: the plan and the packet text are the only sources, and both give exact types), then the field's own rule.
Check = Callable[[Any], Any]


def _text_of(rule: Callable[[str], str]) -> Check:
    def check(value: Any) -> str:
        if type(value) is not str:
            raise ValueError(f"must be a string, not {type(value).__name__}")
        return rule(value)

    return check


def _tuple_of(rule: Callable[[str], str], *, required: bool = False) -> Check:
    item = _text_of(rule)

    def check(value: Any) -> tuple[str, ...]:
        if type(value) is not tuple:
            raise ValueError(f"must be a tuple, not {type(value).__name__}")
        checked = []
        for index, each in enumerate(value):
            try:
                checked.append(item(each))
            except ValueError as error:
                raise _At(index, str(error)) from None
        return _non_empty(tuple(checked)) if required else tuple(checked)

    return check


def _one_of(choices: tuple[str, ...]) -> Check:
    def check(value: Any) -> str:
        if value not in choices or type(value) is not str:
            raise ValueError(f"must be one of {', '.join(choices)}")
        return str(value)

    return check


def _limit(value: Any) -> int:
    if type(value) is not int:
        raise ValueError(f"must be a whole number, not {type(value).__name__}")
    low, high = MESSAGE_LIMIT_RANGE
    if not low <= value <= high:
        raise ValueError(f"must be from {low} to {high} bytes")
    return value


def _optional(check: Check) -> Check:
    return lambda value: None if value is None else check(value)


class _At(ValueError):
    """A bad item of a list field: which one, and what is wrong with it."""

    def __init__(self, index: int, message: str) -> None:
        super().__init__(message)
        self.index = index


_token, _path, _ref, _text, _items = _text_of(check_token), _text_of(_check_abs_path), _text_of(_check_ref), _text_of(_check_text), _tuple_of(_check_item, required=True)
CHECKS: Mapping[str, Check] = {
    "run_id": _token, "task_label": _text_of(check_task_label), "worker_name": _text_of(check_worker_name),
    "worker_target": _token, "controller_target": _token, "worker_kind": _one_of(AGENT_KINDS), "repo_path": _path,
    "workdir": _path, "branch": _ref, "base_ref": _ref, "base_sha": _text_of(_check_sha),
    "execution_mode": _one_of(get_args(ExecutionMode)), "objective": _text, "deliverable": _text, "scope": _items,
    "exclusions": _tuple_of(_check_exclusion), "file_claim": _tuple_of(_check_claim), "evidence": _items,
    "verification": _tuple_of(_check_command, required=True), "stop_conditions": _items,
    "context_files": _tuple_of(_check_abs_path), "callback_prefix": _tuple_of(_check_arg, required=True),
    "report_dir": _optional(_path), "message_limit": _limit,
}  # fmt: skip
# Optional sections, and their value when not given.
DEFAULTS: Mapping[str, object] = {"exclusions": (), "context_files": (), "report_dir": None, "message_limit": DEFAULT_MESSAGE_LIMIT}


@dataclass(frozen=True, kw_only=True)
class Packet:
    """One standalone delegation packet: everything a worker needs to start, and nothing by reference but large files.

    Built only by `build_packet` (and `packets.render.parse_packet`), which check every value (CHECKS)."""

    run_id: str
    task_label: str
    worker_name: str
    worker_target: str
    controller_target: str
    worker_kind: AgentKind
    repo_path: str
    workdir: str
    branch: str
    base_ref: str
    base_sha: str
    execution_mode: ExecutionMode
    objective: str
    deliverable: str
    scope: tuple[str, ...]
    exclusions: tuple[str, ...] = ()
    # Empty: a read-only task (a review, an investigation): the worker may change no file at all.
    file_claim: tuple[str, ...]
    evidence: tuple[str, ...]
    verification: tuple[str, ...]
    stop_conditions: tuple[str, ...]
    context_files: tuple[str, ...] = ()
    callback_prefix: tuple[str, ...]
    # Where the worker may write reports besides its working directory, and the inbound size limit it must respect.
    report_dir: str | None = None
    message_limit: int = DEFAULT_MESSAGE_LIMIT


def problems(fields: Mapping[str, object]) -> tuple[dict[str, Any], list[tuple[str, str]]]:
    """The checked values of fields, and each problem as (field, `where: what`), in field order, unknown fields last."""
    values: dict[str, Any] = {}
    found: list[tuple[str, str]] = []
    for name, check in CHECKS.items():
        if name not in fields:
            if name not in DEFAULTS:
                found.append((name, f"{name}: missing"))
            continue
        try:
            values[name] = check(fields[name])
        except _At as error:
            found.append((name, f"{name}.{error.index}: {error}"))
        except ValueError as error:
            found.append((name, f"{name}: {error}"))
    found += [(name, f"{name}: not a packet field") for name in fields if name not in CHECKS]
    return values, found


def describe(found: list[tuple[str, str]], what: str) -> str:
    """The one line this package promises instead of a traceback: the first problem, and how many more there are."""
    more = len(found) - 1
    return f"invalid {what}: {found[0][1]}" + (f" (and {more} more)" if more else "")


def build_packet(fields: Mapping[str, object]) -> Packet:
    """Check fields into a Packet, raising PacketError with one line naming the first bad one."""
    values, found = problems(fields)
    if found:
        raise PacketError(describe(found, "packet"))
    return Packet(**values)
