"""Scenario files: per task label, the list of steps a scripted worker acts out (TOML, see docs/scenarios.md)."""

from __future__ import annotations

import functools
import tomllib
import types
import typing
from dataclasses import MISSING, dataclass, field, fields
from pathlib import Path
from typing import Any, Literal


class ScenarioError(Exception):
    """A scenario file that cannot be read; str() is one line."""


# The steps and the behaviour are plain frozen dataclasses, so an agent starts without pydantic (AGENTS.md, the third
# named exception). pydantic still owns the rules: `_models()` builds one model per class from these very fields
# (metadata holds the Field arguments: alias, ge, le), and every table `_plain` cannot accept exactly as it would is
# judged by them, so a bad scenario gets pydantic's verdict and message word for word.


@dataclass(frozen=True)
class Update:
    """Send an `update` callback."""

    do: Literal["update"]
    message: str


@dataclass(frozen=True)
class Write:
    """Create, overwrite or append to a file relative to the working directory (inside the claim or not)."""

    do: Literal["write"]
    path: str
    content: str = "{answer}\n"
    append: bool = False


@dataclass(frozen=True)
class Commit:
    """Stage everything and commit on the current branch."""

    do: Literal["commit"]
    message: str = "{task}: scripted change"


@dataclass(frozen=True)
class Run:
    """Run a shell command in the working directory and show its output."""

    do: Literal["run"]
    command: str


@dataclass(frozen=True)
class Verify:
    """Run every verification command of the packet for real and remember the outcomes."""

    do: Literal["verify"]


@dataclass(frozen=True)
class Question:
    """Send a `question`, end the turn idle and wait for an `answer` (the remaining steps run then)."""

    do: Literal["question"]
    message: str


@dataclass(frozen=True)
class Blocked:
    """Send `blocked`, end the turn idle and wait for an answer, follow-up or stop."""

    do: Literal["blocked"]
    message: str


@dataclass(frozen=True)
class Stall:
    """Report working and never finish; only Ctrl-C or a `stop` ends the turn."""

    do: Literal["stall"]


@dataclass(frozen=True)
class Ignore:
    """Never react to the packet: no state report, no output, no callback (herdr sees no state change at all)."""

    do: Literal["ignore"]


@dataclass(frozen=True)
class Crash:
    """Exit the process with a non-zero status in the middle of the task."""

    do: Literal["crash"]
    exit_code: int = field(default=1, metadata={"ge": 1, "le": 255})
    message: str = "internal error: scripted crash"


@dataclass(frozen=True)
class Send:
    """Send any message kind, optionally with forged header fields (wrong run id, sender, task or reply-to)."""

    do: Literal["send"]
    kind: str
    message: str
    run: str | None = None
    task: str | None = None
    sender: str | None = field(default=None, metadata={"alias": "from"})
    reply_to: str | None = field(default=None, metadata={"alias": "reply-to"})


@dataclass(frozen=True)
class Approval:
    """Stop at the kind's own approval form for a command; the answer keys decide (approve: go on; deny: end the turn)."""

    do: Literal["approval"]
    command: str


@dataclass(frozen=True)
class Result:
    """Send the `result`; `checks = "claimed"` reports every check as passed without running it."""

    do: Literal["result"]
    status: str = "done"
    checks: Literal["run", "claimed"] = "run"
    residual_risk: str = "none known"
    report: bool = False
    changed_files: tuple[str, ...] | None = None
    commits: tuple[str, ...] | None = None


Step = Update | Write | Commit | Run | Verify | Question | Blocked | Stall | Ignore | Crash | Send | Approval | Result
STEPS: tuple[type[Any], ...] = typing.get_args(Step)


@dataclass(frozen=True)
class Behaviour:
    """How a kind behaves beyond its steps (`[agents.<kind>]`): the real agents' start-up and screen habits."""

    trust_dialog: bool = False  # the first start in a directory stops at the kind's trust dialog
    trust_focus_decline: bool = False  # the trust dialog opens with its cursor on the decline option (Claude Code 2.1.218 on)
    hooks: bool = True  # report state with `pane report-agent`; false: herdr knows it from its screen only
    title_spinner: bool = False  # set the kind's terminal title, with a spinner while working (always when hooks = false)
    idle_while_working: bool = False  # report idle during `run` steps while the busy line and title still spin
    first_start_delay_ms: int = field(default=0, metadata={"ge": 0})  # a slow first start in a directory
    # A blank screen this long after start, input typed meanwhile lost (opencode 1.18 draws its input ~10 s after start,
    # and herdr reads the blank screen as idle: ../shared/real-agents opencode-1); no hook report until it is drawn.
    blank_start_ms: int = field(default=0, metadata={"ge": 0})
    paste_collapse: bool = False  # show a multi-line paste as the kind's own placeholder


_TAGS = {typing.get_args(typing.get_type_hints(cls)["do"])[0]: cls for cls in STEPS}


def _plain_value(kind: Any, value: Any, meta: typing.Mapping[str, Any]) -> tuple[bool, Any]:
    """(True, the value pydantic would give) for a value of exactly the field's type; (False, None) for anything else."""
    if isinstance(kind, types.UnionType):  # `X | None`: TOML has no null, so only X itself
        inner = [arg for arg in typing.get_args(kind) if arg is not type(None)]
        return _plain_value(inner[0], value, meta) if len(inner) == 1 else (False, None)
    if kind is str or kind is bool:
        return type(value) is kind, value
    if kind is int:
        fits = type(value) is int and meta.get("ge", value) <= value <= meta.get("le", value)
        return fits, value
    if typing.get_origin(kind) is Literal:
        return type(value) is str and value in typing.get_args(kind), value
    if typing.get_origin(kind) is tuple and typing.get_args(kind)[1:] == (Ellipsis,) and typing.get_args(kind)[0] is str:
        return type(value) is list and all(type(item) is str for item in value), tuple(value) if type(value) is list else None
    return False, None


@functools.cache
def _fields(cls: type[Any]) -> tuple[tuple[str, str, Any, Any, typing.Mapping[str, Any]], ...]:
    """(input key, attribute, type, default or MISSING, metadata) of each field of a step or behaviour class."""
    hints = typing.get_type_hints(cls)
    return tuple((f.metadata.get("alias", f.name), f.name, hints[f.name], f.default, f.metadata) for f in fields(cls))


def _plain(cls: type[Any], raw: Any) -> Any | None:
    """The instance pydantic would build from ``raw``, when every key and value is exactly what the class asks; else None.

    Strictly narrower than pydantic (no coercion, no unknown keys, nothing missing), so whatever it accepts pydantic
    accepts with the same result (tests/herdr_sim/test_agent_scenario.py pins it); the rest goes to pydantic.
    """
    if type(raw) is not dict:
        return None
    spec = _fields(cls)
    if not set(raw) <= {key for key, *_ in spec}:
        return None
    values: dict[str, Any] = {}
    for key, name, kind, default, meta in spec:
        if key not in raw:
            if default is MISSING:
                return None
            continue
        ok, values[name] = _plain_value(kind, raw[key], meta)
        if not ok:
            return None
    return cls(**values)


def _plain_steps(raw: Any) -> list[Step] | None:
    if type(raw) is not list:
        return None
    steps = []
    for item in raw:
        cls = _TAGS.get(item.get("do")) if type(item) is dict and type(item.get("do")) is str else None
        step = _plain(cls, item) if cls is not None else None
        if step is None:
            return None
        steps.append(step)
    return steps


@functools.cache
def _models() -> tuple[Any, Any]:
    """pydantic's validators for a list of steps and for a behaviour: one model per class, built from its fields."""
    from typing import Annotated

    from pydantic import ConfigDict, Field, TypeAdapter, create_model

    strict = ConfigDict(frozen=True, extra="forbid")

    def model(cls: type[Any]) -> Any:
        defs = {
            name: (kind, Field(... if default is MISSING else default, **meta))
            for _key, name, kind, default, meta in _fields(cls)
        }
        return create_model(cls.__name__, __config__=strict, __doc__=cls.__doc__, **defs)

    steps = tuple(model(cls) for cls in STEPS)
    union = Annotated[typing.Union[steps], Field(discriminator="do")]  # noqa: UP007 (a tuple of runtime classes)
    return TypeAdapter(list[union]), model(Behaviour)


def _as_plain(cls: type[Any], validated: Any) -> Any:
    return cls(**{name: getattr(validated, name) for _key, name, *_ in _fields(cls)})


class Invalid(Exception):
    """A table pydantic refused: where (its first error's location, dotted) and pydantic's message."""

    def __init__(self, where: str, message: str) -> None:
        super().__init__(f"{where}: {message}")
        self.where = where
        self.message = message


def _judged(validate: typing.Callable[[], Any]) -> Any:
    from pydantic import ValidationError

    try:
        return validate()
    except ValidationError as exc:
        first = exc.errors()[0]
        raise Invalid(".".join(str(part) for part in first["loc"]), first["msg"]) from None


def validate_steps(raw: Any) -> list[Step]:
    """The steps of a scenario table; Invalid with pydantic's first error for a bad one."""
    plain = _plain_steps(raw)
    if plain is not None:
        return plain
    adapter, _ = _models()
    return [_as_plain(_TAGS[step.do], step) for step in _judged(lambda: adapter.validate_python(raw))]


def validate_behaviour(raw: Any) -> Behaviour:
    """The behaviour of an `[agents.<kind>]` table; Invalid with pydantic's first error for a bad one."""
    plain = _plain(Behaviour, raw)
    if plain is not None:
        return plain
    _, model = _models()
    validated: Behaviour = _as_plain(Behaviour, _judged(lambda: model.model_validate(raw)))
    return validated


def scenario_path(env: dict[str, str]) -> Path | None:
    """The scenario file in force: $HERDR_SIM_SCENARIOS, else $HERDR_SIM_HOME/scenarios.toml if it exists."""
    if env.get("HERDR_SIM_SCENARIOS"):
        return Path(env["HERDR_SIM_SCENARIOS"])
    if env.get("HERDR_SIM_HOME"):
        candidate = Path(env["HERDR_SIM_HOME"]) / "scenarios.toml"
        if candidate.is_file():
            return candidate
    return None


def _read(path: Path) -> dict[str, Any]:
    """The scenario file's top-level tables (`task`, `follow-up`, `agents`), each checked to be a table."""
    try:
        data = tomllib.loads(path.read_text())
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ScenarioError(f"cannot read scenario file {path}: {exc}") from None
    unknown = sorted(set(data) - {"task", "follow-up", "agents"})
    if unknown:
        raise ScenarioError(f"{path}: unknown top-level table [{unknown[0]}]")
    for name, value in data.items():
        if not isinstance(value, dict):
            raise ScenarioError(f"{path}: {name} must be a table ([{name}.<label>]), not {type(value).__name__}")
    return data


def _table(path: Path, section: str, label: str) -> list[Step] | None:
    raw = _read(path).get(section, {}).get(label)
    if raw is None:
        return None
    try:
        return validate_steps(raw)
    except Invalid as exc:
        raise ScenarioError(f"{path}: {section}.{label}[{exc.where}]: {exc.message}") from None


def default_task_steps() -> list[Step]:
    """The well-behaved worker: a small file inside the claim, a commit, real checks, a result."""
    return validate_steps(
        [
            {"do": "update", "message": "Starting {task}: {objective_line}"},
            {"do": "write", "path": "{claim_file}", "content": "{task}: {objective_line}\n"},
            {"do": "commit", "message": "{task}: {objective_line}"},
            {"do": "verify"},
            {"do": "result"},
        ]
    )


def default_follow_up_steps() -> list[Step]:
    """A follow-up without a scripted turn: note the request in the claimed file, commit, re-verify, report."""
    return validate_steps(
        [
            {"do": "write", "path": "{claim_file}", "content": "follow-up: {answer}\n", "append": True},
            {"do": "commit", "message": "{task}: follow-up"},
            {"do": "verify"},
            {"do": "result"},
        ]
    )


def load_steps(env: dict[str, str], section: Literal["task", "follow-up"], label: str) -> list[Step]:
    """The steps for a task label (or its follow-up), falling back to the default behaviour."""
    path = scenario_path(env)
    steps = _table(path, section, label) if path is not None and path.is_file() else None
    if path is not None and not path.is_file() and env.get("HERDR_SIM_SCENARIOS"):
        raise ScenarioError(f"scenario file {path} does not exist")
    if steps is not None:
        return steps
    return default_task_steps() if section == "task" else default_follow_up_steps()


def load_probe_steps(env: dict[str, str], label: str, kind: str, message: str) -> list[Step]:
    """A probe's steps: its task label's scenario if the file has one (e.g. a forged sender), else its one message."""
    path = scenario_path(env)
    steps = _table(path, "task", label) if path is not None and path.is_file() else None
    if steps is not None:
        return steps
    return validate_steps([{"do": "send", "kind": kind, "message": message}])


def load_behaviour(env: dict[str, str], kind: str) -> Behaviour:
    """The `[agents.<kind>]` table of the scenario file in force (read at start-up), else the cooperative default."""
    path = scenario_path(env)
    if path is None or not path.is_file():
        return Behaviour()
    raw = _read(path).get("agents", {}).get(kind, {})
    try:
        return validate_behaviour(raw)
    except Invalid as exc:
        raise ScenarioError(f"{path}: agents.{kind}.{exc.where}: {exc.message}") from None
