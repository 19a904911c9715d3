"""The delegation packet model: every section the spec requires, with values checked so the rendered text stays parseable and shell-safe."""

from __future__ import annotations

import posixpath
import re
from collections.abc import Mapping
from typing import Annotated, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError

from packets.errors import PacketError
from packets.envelope import DEFAULT_MESSAGE_LIMIT, MESSAGE_LIMIT_RANGE, check_task_label, check_token

# herdr 0.7.5 `agent start --kind` accepts exactly these (CONTRACT.md §8.4).
AGENT_KINDS: tuple[str, ...] = (
    "pi", "claude", "codex", "gemini", "cursor", "devin", "agy", "cline", "omp", "mastracode", "opencode",
    "copilot", "kimi", "kiro", "droid", "amp", "grok", "hermes", "kilo", "qodercli", "maki",
)
AgentKind = Literal[
    "pi", "claude", "codex", "gemini", "cursor", "devin", "agy", "cline", "omp", "mastracode", "opencode",
    "copilot", "kimi", "kiro", "droid", "amp", "grok", "hermes", "kilo", "qodercli", "maki",
]
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


Token = Annotated[str, AfterValidator(check_token)]
TaskLabel = Annotated[str, AfterValidator(check_task_label)]
WorkerName = Annotated[str, AfterValidator(check_worker_name)]
AbsPath = Annotated[str, AfterValidator(_check_abs_path)]
RefName = Annotated[str, AfterValidator(_check_ref)]
Sha = Annotated[str, AfterValidator(_check_sha)]
Text = Annotated[str, AfterValidator(_check_text)]
Item = Annotated[str, AfterValidator(_check_item)]
Items = Annotated[tuple[Item, ...], AfterValidator(_non_empty)]


class Packet(BaseModel):
    """One standalone delegation packet: everything a worker needs to start, and nothing by reference but large files."""

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)

    run_id: Token
    task_label: TaskLabel
    worker_name: WorkerName
    worker_target: Token
    controller_target: Token
    worker_kind: AgentKind
    repo_path: AbsPath
    workdir: AbsPath
    branch: RefName
    base_ref: RefName
    base_sha: Sha
    execution_mode: ExecutionMode
    objective: Text
    deliverable: Text
    scope: Items
    exclusions: tuple[Annotated[str, AfterValidator(_check_exclusion)], ...] = ()
    # Empty: a read-only task (a review, an investigation): the worker may change no file at all.
    file_claim: tuple[Annotated[str, AfterValidator(_check_claim)], ...]
    evidence: Items
    verification: Annotated[tuple[Annotated[str, AfterValidator(_check_command)], ...], AfterValidator(_non_empty)]
    stop_conditions: Items
    context_files: tuple[AbsPath, ...] = ()
    callback_prefix: Annotated[tuple[Annotated[str, AfterValidator(_check_arg)], ...], AfterValidator(_non_empty)]
    # Where the worker may write reports besides its working directory, and the inbound size limit it must respect.
    report_dir: AbsPath | None = None
    message_limit: Annotated[int, Field(ge=MESSAGE_LIMIT_RANGE[0], le=MESSAGE_LIMIT_RANGE[1])] = DEFAULT_MESSAGE_LIMIT


def describe_validation_error(error: ValidationError, what: str) -> str:
    """Turn a pydantic error into the one line this package promises instead of a traceback."""
    first = error.errors()[0]
    where = ".".join(str(part) for part in first["loc"])
    message = str(first["msg"]).removeprefix("Value error, ")
    more = error.error_count() - 1
    return f"invalid {what}: " + (f"{where}: " if where else "") + message + (f" (and {more} more)" if more else "")


def build_packet(fields: Mapping[str, object]) -> Packet:
    """Validate fields into a Packet, raising PacketError with one line instead of a pydantic error."""
    try:
        return Packet.model_validate(dict(fields))
    except ValidationError as error:
        raise PacketError(describe_validation_error(error, "packet")) from None
