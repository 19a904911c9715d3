"""The records the ledger hands out (runs, workers, events, inbox messages, effects): frozen dataclasses, checked when built.

Also the one codec of plain records to and from JSON: `build(Record, data)` checks a JSON object into any frozen
dataclass of the field types below (records inside records included), `plain(record)` gives it back as JSON holds it.
The engine's other stored records (a verification, a check's run) go through it too, so no second codec is needed.
"""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from enum import Enum
from pathlib import Path
from types import NoneType, UnionType
from typing import Any, Literal, TypeVar

from registry.errors import RegistryError
from registry.kinds import CONTROLLER_HOST, EffectStatus, InboxVerdict, RunStatus, RunVerdict
from registry.machine import WorkerState

# Plain records, not pydantic models: they are what every phase reads, and the ledger builds them from its own rows and
# from its callers' keyword changes, so one small check (`build`) of the few types they use is all they need, and no
# command pays pydantic's start-up for them. pydantic stays at the edges (docs/ARCHITECTURE.md).


def as_utc(value: datetime) -> datetime:
    """The same instant in UTC; naive datetimes are refused."""
    # Naive datetimes are ambiguous across controller processes; the ledger only speaks UTC.
    if value.tzinfo is None or value.utcoffset() is None:
        raise ValueError("timestamp must be timezone-aware")
    return value.astimezone(UTC)


def make_run_id(controller_pane: str, at: datetime) -> str:
    """The spec's run id, `${controller_pane}-${UTC yyyymmddTHHMMSSZ}`, e.g. `w1:p1-20261130T080000Z`."""
    if not controller_pane or any(ch.isspace() for ch in controller_pane):
        raise ValueError(f"controller pane id must be non-empty without whitespace, got {controller_pane!r}")
    return f"{controller_pane}-{as_utc(at):%Y%m%dT%H%M%SZ}"


@dataclasses.dataclass(frozen=True, kw_only=True)
class Run:
    """One orchestration run: its controller, target repo and where it stopped."""

    run_id: str
    controller_target: str
    session: str | None
    organization: str | None
    repo: str | None
    repo_path: str | None
    base_ref: str | None
    base_sha: str | None
    plan_path: str | None
    status: RunStatus
    stopped_at: str | None
    verdict: RunVerdict | None
    created_at: datetime
    updated_at: datetime
    workspace_id: str | None = None
    repo_tab_id: str | None = None
    controller_workspace_id: str | None = None
    controller_tab_id: str | None = None
    default_branch: str | None = None
    created_workspace_ids: tuple[str, ...] = ()
    controller_kind: Literal["agent", "run"] = "agent"


@dataclasses.dataclass(frozen=True, kw_only=True)
class Worker:
    """One worker's registry entry: the spec's fields plus layout, git and liveness bookkeeping."""

    run_id: str
    task_label: str
    name: str
    kind: str
    # Which machine runs it (a plan host name); its herdr ids are that host's herdr's, meaningful only with it.
    host: str = CONTROLLER_HOST
    state: WorkerState
    objective: str
    claimed_files: tuple[str, ...]
    pane_id: str | None
    reply_target: str | None
    last_callback_id: int | None
    pending_question: str | None
    reported_checks: str | None
    controller_verification: str | None
    final_disposition: WorkerState | None
    branch: str | None
    worktree_path: str | None
    tab_label: str | None
    workspace_id: str | None
    tab_id: str | None
    created_workspace_ids: tuple[str, ...]
    created_pane_ids: tuple[str, ...]
    created_worktree_paths: tuple[str, ...]
    base_sha: str | None
    head_sha: str | None
    integrated_sha: str | None
    last_state_change_seq: int | None
    unchanged_check_ins: int
    created_at: datetime
    updated_at: datetime


@dataclasses.dataclass(frozen=True, kw_only=True)
class Event:
    """One append-only journal row: a state change or a recorded fact."""

    seq: int
    run_id: str
    task_label: str | None
    at: datetime
    kind: str
    from_state: WorkerState | None
    to_state: WorkerState | None
    detail: dict[str, Any]


@dataclasses.dataclass(frozen=True, kw_only=True)
class InboxMessage:
    """One inbound message exactly as received, with the validation verdict it got."""

    id: int
    run_id: str
    received_at: datetime
    source: str
    raw: str
    verdict: InboxVerdict
    reason_code: str | None
    reason: str | None
    task_label: str | None
    kind: str | None
    sender: str | None
    fingerprint: str
    handled_at: datetime | None


@dataclasses.dataclass(frozen=True, kw_only=True)
class Effect:
    """One side effect on herdr or git, recorded before it is made and settled after."""

    id: int
    run_id: str
    task_label: str | None
    kind: str
    key: str
    status: EffectStatus
    request: dict[str, Any]
    response: dict[str, Any] | None
    error: str | None
    intended_at: datetime
    settled_at: datetime | None
    # Not stored: True only on the row intend() has just created, so exactly one caller (of all processes)
    # owns making the call; everyone else got an existing row and must settle it by read-back, not repeat it.
    is_new: bool = False


Record = Run | Worker | Event | InboxMessage | Effect
R = TypeVar("R", Run, Worker, Event, InboxMessage, Effect)
D = TypeVar("D")  # any record `build` checks: the ledger's, or another plain frozen dataclass stored as JSON


class _Bad(ValueError):
    """One value that does not fit its field: where inside it (`.0` for a tuple's first item) and what was expected."""

    def __init__(self, expected: str, value: object, where: str = "", inner: list[str] | None = None) -> None:
        super().__init__(f"must be {expected}, not {type(value).__name__}")
        self.where = where
        self.inner = inner or []  # a record inside a record: its own `field: what is wrong` lines


Check = Callable[[Any], Any]


def _check_of(annotation: Any) -> tuple[Check, str]:
    """The check of one field type, and how a message names that type."""
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin in (UnionType, typing.Union) and NoneType in args:
        inner, name = _check_of(next(arg for arg in args if arg is not NoneType))

        def optional(value: Any) -> Any:
            if value is None:
                return None
            try:
                return inner(value)
            except _Bad as bad:
                raise bad if bad.where or bad.inner else _Bad(f"{name} | None", value) from None

        return optional, f"{name} | None"
    if origin is tuple:
        item, name = _check_of(args[0])

        def items(value: Any) -> tuple[Any, ...]:
            if not isinstance(value, (tuple, list)):
                raise _Bad(f"tuple[{name}, ...]", value)
            checked = []
            for index, each in enumerate(value):
                try:
                    checked.append(item(each))
                except _Bad as bad:
                    bad.where = f".{index}{bad.where}"
                    raise bad from None
            return tuple(checked)

        return items, f"tuple[{name}, ...]"
    if origin is dict:

        def mapping(value: Any) -> dict[str, Any]:
            if not isinstance(value, dict):
                raise _Bad("a JSON object", value)
            return dict(value)

        return mapping, "dict"
    if origin is Literal:

        def literal(value: Any) -> Any:
            if value not in args:
                raise _Bad(" or ".join(repr(arg) for arg in args), value)
            return value

        return literal, " | ".join(repr(arg) for arg in args)
    if isinstance(annotation, type) and issubclass(annotation, Enum):
        enum = annotation

        def member(value: Any) -> Enum:
            try:
                return enum(value)
            except ValueError:
                raise _Bad(f"a {enum.__name__} ({', '.join(str(m.value) for m in enum)})", value) from None

        return member, enum.__name__
    if annotation is datetime:

        def stamp(value: Any) -> datetime:
            # The ledger stores ISO UTC text (registry.core.column); callers hand over aware datetimes.
            if isinstance(value, str):
                try:
                    value = datetime.fromisoformat(value)
                except ValueError:
                    raise _Bad("an ISO timestamp", value) from None
            if not isinstance(value, datetime):
                raise _Bad("datetime", value)
            if value.tzinfo is None or value.utcoffset() is None:
                raise _Bad("timezone-aware", value)
            return value.astimezone(UTC)

        return stamp, "datetime"
    if isinstance(annotation, type) and dataclasses.is_dataclass(annotation):
        inner_record = annotation

        def nested(value: Any) -> Any:
            # A record inside a record (a verification's checks): its own fields checked the same way.
            if isinstance(value, inner_record):
                return value
            if not isinstance(value, dict):
                raise _Bad(f"a {inner_record.__name__} (a JSON object)", value)
            values, found = _checked(inner_record, value)
            if found:
                raise _Bad(inner_record.__name__, value, inner=found)
            return inner_record(**values)

        return nested, inner_record.__name__
    if annotation is float:

        def real(value: Any) -> float:
            # JSON writes a whole float as it likes (1 or 1.0); a bool is not a number here.
            if type(value) not in (int, float):
                raise _Bad("float", value)
            return float(value)

        return real, "float"
    if annotation is Path:

        def path(value: Any) -> Path:
            # JSON holds a path as its text.
            if not isinstance(value, (str, Path)):
                raise _Bad("a path", value)
            return Path(value)

        return path, "Path"
    if annotation is bool:

        def flag(value: Any) -> bool:
            if not isinstance(value, bool):
                raise _Bad("bool", value)
            return value

        return flag, "bool"
    if annotation is int:

        def number(value: Any) -> int:
            if type(value) is not int:
                raise _Bad("int", value)
            return value

        return number, "int"
    if annotation is str:

        def text(value: Any) -> str:
            if not isinstance(value, str):
                raise _Bad("str", value)
            # A str enum (a kind, a state) is kept as its plain value, as the ledger stores it.
            return value.value if isinstance(value, Enum) else value

        return text, "str"
    raise TypeError(f"no record check for {annotation!r}")  # a new field type needs its check here


_FIELDS: dict[type, Mapping[str, tuple[Check, bool]]] = {}


def fields_of(record: type[Any]) -> Mapping[str, tuple[Check, bool]]:
    """Each field of a record with its check and whether it must be given (it has no default)."""
    if record not in _FIELDS:
        hints = typing.get_type_hints(record)
        _FIELDS[record] = {
            field.name: (_check_of(hints[field.name])[0], field.default is dataclasses.MISSING)
            for field in dataclasses.fields(record)
        }
    return _FIELDS[record]


def problems(record: type[Any], data: Mapping[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """The checked values of data's fields of record, and one `field: what is wrong` line per bad or unknown field."""
    checks = fields_of(record)
    values: dict[str, Any] = {}
    found = [f"{name}: not a field" for name in data if name not in checks]
    for name, value in data.items():
        if name in checks:
            try:
                values[name] = checks[name][0](value)
            except _Bad as bad:
                found += [f"{name}{bad.where}.{line}" for line in bad.inner] if bad.inner else [f"{name}{bad.where}: {bad}"]
    return values, found


def _checked(record: type[Any], data: Mapping[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """``problems``, and one `field: missing` line per field without a default that data lacks."""
    values, found = problems(record, data)
    return values, found + [f"{name}: missing" for name, (_, required) in fields_of(record).items() if required and name not in data]


def build(record: type[D], data: Mapping[str, Any]) -> D:
    """A record (the ledger's, or any plain frozen dataclass of the same field types) from data, every field checked
    (lists become tuples, enum values their enums, ISO text aware datetimes, text paths, objects the records they
    hold); anything else is one RegistryError line naming each bad field (a ledger error, never a traceback)."""
    values, found = _checked(record, data)
    if found:
        raise RegistryError(f"invalid {record.__name__.lower()}: {'; '.join(found)}")
    return record(**values)


def replace(record: D, **changes: Any) -> D:
    """The record with ``changes`` (checked as `build` checks them)."""
    return build(type(record), {**as_dict(record), **changes})


def as_dict(record: Any) -> dict[str, Any]:
    """Every field of the record by name, values as they are (shallow: no copy of tuples or details)."""
    return {field.name: getattr(record, field.name) for field in dataclasses.fields(record)}


def plain(value: Any) -> Any:
    """A field value as JSON holds it: enums by value, tuples as lists, paths as text, a record as its fields (what the
    journal records of a change, and what the engine stores of a record; `build` reads it back)."""
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, tuple):
        return [plain(each) for each in value]
    if isinstance(value, Path):
        return str(value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {name: plain(each) for name, each in as_dict(value).items()}
    return value
