"""The simulated server's state: typed dataclasses, strictly checked on every load and save, persisted as one JSON
file under an exclusive fcntl lock.

Every herdr call is a fresh process that loads this state; pydantic cost ~0.18 s of CPU per call just to import and
build the models (bench/sim_calls.py), more than the call's own work. ``validate`` keeps the strictness: every field's
type, nested models, literals and required fields are checked (unknown keys are ignored, as before).
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import json
import os
import tempfile
import types
import typing
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar

from herdr_sim.paths import Paths

State = Literal["idle", "working", "blocked", "unknown"]
T = TypeVar("T")


class StateError(ValueError):
    """The state file (or a state about to be saved) does not match the models."""


@dataclass
class Pane:
    """One simulated pane and the terminal (tmux pane) it hosts."""

    pane_id: str
    terminal_id: str
    workspace_id: str
    tab_id: str
    tmux: str
    shell_pid: int
    cwd: str
    label: str | None = None
    aliases: list[str] = field(default_factory=list)
    revision: int = 0
    # Hook authority (pane report-agent).
    hook_source: str | None = None
    hook_agent: str | None = None
    hook_seqs: dict[str, int] = field(default_factory=dict)
    agent_session: dict[str, str] | None = None
    state: State = "unknown"
    # The last hook-reported state, and what screen detection (herdr_sim.detect) last concluded.
    hook_state: State | None = None
    screen_state: State | None = None
    screen_blocker: bool = False
    detected_at: float | None = None
    seen: bool = True
    state_change_seq: int = 0
    # The state_change_seq of the last change to working or blocked. herdr's `agent prompt --wait` gate observes every
    # lifecycle event (0.9.1 DELTA row 2); the simulator's call polls, so a turn that went working and back to idle
    # between two of its looks is found here.
    active_seq: int = 0
    detected: str | None = None
    name: str | None = None
    launch_kind: str | None = None
    launch_typed_at: float | None = None
    launch_deadline: float | None = None
    interactive_ready: bool = False
    # 0.9.5 DELTA row 1: finished turns (a change to idle from working or blocked, the moment herdr shows `done`).
    completion_seq: int = 0
    # 0.9.5 DELTA row 2: why the pane could not be restored after a server restart (the simulator never restores:
    # every server starts empty, so only a test sets it).
    restore_error: str | None = None
    # 0.9.5 DELTA row 6: the command a hook reported as resuming its session (`… -- RESUME_ARG…`); herdr shows it
    # nowhere documented, so neither does the simulator.
    resume_command: list[str] | None = None


@dataclass
class Tab:
    """A tab: a split tree of panes and its focused pane."""

    tab_id: str
    number: int
    layout: dict[str, Any]
    custom_label: str | None = None
    focused_pane_id: str | None = None


@dataclass
class Workspace:
    """A workspace with its tabs and per-workspace counters."""

    workspace_id: str
    cwd: str
    custom_label: str | None = None
    tabs: list[Tab] = field(default_factory=list)
    next_tab: int = 1
    next_pane: int = 1
    active_tab_id: str | None = None
    worktree: dict[str, Any] | None = None
    group_parent: str | None = None


@dataclass
class Fault:
    """One injected failure waiting for a matching command."""

    command: str
    code: str | None = None
    message: str | None = None
    drop_root_pane: bool = False
    delay_ms: int | None = None
    times: int = 1
    # The herdr client killed (SIGKILL) as by a timeout or the OOM killer: "before" it acts (the server never saw
    # the request), or "after" it acted and before it answered (done, but the caller never learns it).
    die: str | None = None
    # A wedged server: the client's connection is accepted (by the kernel) and never answered, so the call runs until
    # its caller's own time limit kills it; herdr never acts on it.
    hang: bool | None = None

    def dump(self) -> dict[str, Any]:
        """The fault as JSON, without unset (None) fields."""
        return {k: v for k, v in dataclasses.asdict(self).items() if v is not None}


@dataclass
class World:
    """Everything the simulated server knows."""

    server_pid: int | None = None
    session: str | None = None
    settle_ms: int = 3000
    next_workspace: int = 1
    terminal_counter: int = 0
    state_change_seq: int = 0
    active_workspace_id: str | None = None
    workspaces: list[Workspace] = field(default_factory=list)
    panes: dict[str, Pane] = field(default_factory=dict)
    faults: list[Fault] = field(default_factory=list)
    prompt_counter: int = 0
    # Every UI-focused pane the server has had, in order (test support: "focus never left the controller").
    focus_history: list[str] = field(default_factory=list)


def ui_focused_pane(world: World) -> str | None:
    """The pane a person would be typing into: the active workspace's active tab's focused pane."""
    ws = next((w for w in world.workspaces if w.workspace_id == world.active_workspace_id), None)
    tab = next((t for t in ws.tabs if t.tab_id == ws.active_tab_id), None) if ws else None
    return tab.focused_pane_id if tab else None


_HINTS: dict[type, dict[str, Any]] = {}


def _hints(cls: type) -> dict[str, Any]:
    if cls not in _HINTS:
        _HINTS[cls] = typing.get_type_hints(cls)
    return _HINTS[cls]


def warm() -> None:
    """Resolve every model's type hints and build its checker now (the call zygote does, once, before it forks)."""
    for cls in (World, Workspace, Tab, Pane, Fault):
        _hints(cls)
        _checker(cls)


def validate(cls: type[T], data: Any, where: str = "state") -> T:
    """Build ``cls`` from JSON data, checking every field strictly; StateError names the first bad field."""
    try:
        return _checker(cls)(data)  # type: ignore[no-any-return]
    except _Invalid:
        return _validate(cls, data, where)  # it names what is wrong


def _validate(cls: type[T], data: Any, where: str) -> T:
    # The reference checker, which _checker's compiled ones mirror; run on their refusal, to say what is wrong.
    if not isinstance(data, dict):
        raise StateError(f"{where}: expected an object, got {type(data).__name__}")
    hints = _hints(cls)
    values: dict[str, Any] = {}
    for f in dataclasses.fields(cls):  # type: ignore[arg-type]
        if f.name in data:
            values[f.name] = _check(data[f.name], hints[f.name], f"{where}.{f.name}")
        elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            raise StateError(f"{where}.{f.name}: field required")
    return cls(**values)


def _check(value: Any, hint: Any, where: str) -> Any:
    if hint is Any:
        return value
    if dataclasses.is_dataclass(hint):
        return _validate(hint, value, where)  # type: ignore[arg-type]
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (types.UnionType, typing.Union):
        if value is None and type(None) in args:
            return None
        errors = []
        for arg in (a for a in args if a is not type(None)):
            try:
                return _check(value, arg, where)
            except StateError as exc:
                errors.append(str(exc))
        raise StateError(errors[0] if len(errors) == 1 else f"{where}: {value!r} matches none of {hint}")
    if origin is Literal:
        if value in args and isinstance(value, str):
            return value
        raise StateError(f"{where}: {value!r} is not one of {', '.join(map(repr, args))}")
    if origin is list:
        if not isinstance(value, list):
            raise StateError(f"{where}: expected a list, got {type(value).__name__}")
        return [_check(v, args[0], f"{where}[{i}]") for i, v in enumerate(value)]
    if origin is dict:
        if not isinstance(value, dict) or not all(isinstance(k, str) for k in value):
            raise StateError(f"{where}: expected an object with string keys")
        return {k: _check(v, args[1], f"{where}.{k}") for k, v in value.items()}
    if hint is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if hint in (str, int, float, bool) and isinstance(value, hint) and (hint is bool or not isinstance(value, bool)):
        return value
    raise StateError(f"{where}: expected {getattr(hint, '__name__', hint)}, got {type(value).__name__} {value!r}")


# Every call and every server tick loads and dumps the whole state: interpreting the type hints (and formatting a
# path for every value) was most of that. _checker compiles each hint once into a closure that accepts exactly what
# _check accepts and returns the same value, or raises _Invalid (then _validate runs, for the message).
class _Invalid(Exception):
    pass


Checker = typing.Callable[[Any], Any]
_CHECKERS: dict[Any, Checker] = {}


def _checker(hint: Any) -> Checker:
    try:
        return _CHECKERS[hint]
    except KeyError:
        pass
    except TypeError:  # an unhashable hint: never cached
        return _compile(hint)
    found = _CHECKERS[hint] = _compile(hint)
    return found


def _compile(hint: Any) -> Checker:
    if hint is Any:
        return lambda value: value
    if dataclasses.is_dataclass(hint):
        return _compile_model(hint)  # type: ignore[arg-type]
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (types.UnionType, typing.Union):
        none_ok = type(None) in args
        options = [_checker(a) for a in args if a is not type(None)]

        def union(value: Any) -> Any:
            if value is None and none_ok:
                return None
            for option in options:
                try:
                    return option(value)
                except _Invalid:
                    pass
            raise _Invalid

        return union
    if origin is Literal:
        def literal(value: Any) -> Any:
            if value in args and isinstance(value, str):
                return value
            raise _Invalid

        return literal
    if origin is list:
        item = _checker(args[0])

        def listed(value: Any) -> Any:
            if not isinstance(value, list):
                raise _Invalid
            return [item(v) for v in value]

        return listed
    if origin is dict:
        entry = _checker(args[1])

        def mapping(value: Any) -> Any:
            if not isinstance(value, dict) or not all(isinstance(k, str) for k in value):
                raise _Invalid
            return {k: entry(v) for k, v in value.items()}

        return mapping
    if hint is float:
        def number(value: Any) -> Any:
            if isinstance(value, bool):
                raise _Invalid
            if isinstance(value, float):
                return value
            if isinstance(value, int):
                return float(value)
            raise _Invalid

        return number
    if hint in (str, int, bool):
        def scalar(value: Any) -> Any:
            if isinstance(value, hint) and (hint is bool or not isinstance(value, bool)):
                return value
            raise _Invalid

        return scalar

    def never(value: Any) -> Any:
        raise _Invalid

    return never


def _compile_model(cls: type) -> Checker:
    hints = _hints(cls)
    fields: list[tuple[str, Checker | None, bool]] = []

    def model(data: Any) -> Any:
        if not isinstance(data, dict):
            raise _Invalid
        values: dict[str, Any] = {}
        for name, check, required in fields:
            if name in data:
                values[name] = check(data[name])  # type: ignore[misc]
            elif required:
                raise _Invalid
        return cls(**values)

    _CHECKERS[cls] = model  # before its fields: a model may contain itself
    for f in dataclasses.fields(cls):  # type: ignore[arg-type]
        required = f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
        fields.append((f.name, _checker(hints[f.name]), required))
    return model


_ATOMIC = (str, int, float, bool, type(None))


def _plain(value: Any) -> Any:
    """dataclasses.asdict's copy of a value, for the types the models hold (_Invalid for any other)."""
    kind = type(value)
    if kind in _ATOMIC:
        return value
    if kind is list:
        return [_plain(v) for v in value]
    if kind is dict:
        return {_plain(k): _plain(v) for k, v in value.items()}
    names = _NAMES.get(kind)
    if names is None:
        raise _Invalid
    return {name: _plain(getattr(value, name)) for name in names}


_NAMES: dict[type, tuple[str, ...]] = {cls: tuple(f.name for f in dataclasses.fields(cls))
                                       for cls in (World, Workspace, Tab, Pane, Fault)}


def dump(world: World) -> str:
    """The world as compact JSON, checked first: a state that would not load again is never written."""
    try:
        data = _plain(world)
    except _Invalid:
        data = dataclasses.asdict(world)
    validate(World, data)
    return json.dumps(data, separators=(",", ":"), ensure_ascii=False)


class Store:
    """Reads and writes the World atomically; `transaction` holds the lock for one read-modify-write."""

    def __init__(self, paths: Paths) -> None:
        self.paths = paths

    def load(self) -> World:
        """Read the current state without locking (the file is replaced atomically)."""
        return self._read()[1]

    def _read(self) -> tuple[str | None, World]:
        """The state file's text (None when there is none yet) and the World it holds."""
        try:
            text = self.paths.state.read_text()
        except FileNotFoundError:
            return None, World()
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise StateError(f"{self.paths.state}: not JSON: {exc}") from None
        return text, validate(World, data)

    def save(self, world: World) -> None:
        """Atomically replace the state file."""
        self._write(dump(world))

    def _write(self, text: str) -> None:
        fd, tmp = tempfile.mkstemp(dir=self.paths.home, prefix=".state.", suffix=".json")
        with os.fdopen(fd, "w") as handle:
            handle.write(text)
        os.replace(tmp, self.paths.state)

    @contextlib.contextmanager
    def transaction(self) -> Iterator[World]:
        """Lock, load, yield, save. Never sleep inside one."""
        self.paths.home.mkdir(parents=True, exist_ok=True)
        with open(self.paths.lock, "a+") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                before, world = self._read()
                yield world
                focused = ui_focused_pane(world)
                if focused is not None and (not world.focus_history or world.focus_history[-1] != focused):
                    world.focus_history.append(focused)
                after = dump(world)
                # Most transactions (the server's reconcile ticks, read-only calls) change nothing: the same bytes
                # need no new file (a new inode and a rename cost more CPU than the whole check).
                if after != before:
                    self._write(after)
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)
