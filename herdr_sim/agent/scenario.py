"""Scenario files: per task label, the list of steps a scripted worker acts out (TOML, see docs/scenarios.md)."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

_STRICT = ConfigDict(frozen=True, extra="forbid")


class ScenarioError(Exception):
    """A scenario file that cannot be read; str() is one line."""


class Update(BaseModel):
    """Send an `update` callback."""

    model_config = _STRICT
    do: Literal["update"]
    message: str


class Write(BaseModel):
    """Create, overwrite or append to a file relative to the working directory (inside the claim or not)."""

    model_config = _STRICT
    do: Literal["write"]
    path: str
    content: str = "{answer}\n"
    append: bool = False


class Commit(BaseModel):
    """Stage everything and commit on the current branch."""

    model_config = _STRICT
    do: Literal["commit"]
    message: str = "{task}: scripted change"


class Run(BaseModel):
    """Run a shell command in the working directory and show its output."""

    model_config = _STRICT
    do: Literal["run"]
    command: str


class Verify(BaseModel):
    """Run every verification command of the packet for real and remember the outcomes."""

    model_config = _STRICT
    do: Literal["verify"]


class Question(BaseModel):
    """Send a `question`, end the turn idle and wait for an `answer` (the remaining steps run then)."""

    model_config = _STRICT
    do: Literal["question"]
    message: str


class Blocked(BaseModel):
    """Send `blocked`, end the turn idle and wait for an answer, follow-up or stop."""

    model_config = _STRICT
    do: Literal["blocked"]
    message: str


class Stall(BaseModel):
    """Report working and never finish; only Ctrl-C or a `stop` ends the turn."""

    model_config = _STRICT
    do: Literal["stall"]


class Ignore(BaseModel):
    """Never react to the packet: no state report, no output, no callback (herdr sees no state change at all)."""

    model_config = _STRICT
    do: Literal["ignore"]


class Crash(BaseModel):
    """Exit the process with a non-zero status in the middle of the task."""

    model_config = _STRICT
    do: Literal["crash"]
    exit_code: int = Field(default=1, ge=1, le=255)
    message: str = "internal error: scripted crash"


class Send(BaseModel):
    """Send any message kind, optionally with forged header fields (wrong run id, sender, task or reply-to)."""

    model_config = _STRICT
    do: Literal["send"]
    kind: str
    message: str
    run: str | None = None
    task: str | None = None
    sender: str | None = Field(default=None, alias="from")
    reply_to: str | None = Field(default=None, alias="reply-to")


class Approval(BaseModel):
    """Stop at the kind's own approval form for a command; the answer keys decide (approve: go on; deny: end the turn)."""

    model_config = _STRICT
    do: Literal["approval"]
    command: str


class Result(BaseModel):
    """Send the `result`; `checks = "claimed"` reports every check as passed without running it."""

    model_config = _STRICT
    do: Literal["result"]
    status: str = "done"
    checks: Literal["run", "claimed"] = "run"
    residual_risk: str = "none known"
    report: bool = False
    changed_files: tuple[str, ...] | None = None
    commits: tuple[str, ...] | None = None


Step = Annotated[
    Update | Write | Commit | Run | Verify | Question | Blocked | Stall | Ignore | Crash | Send | Approval | Result,
    Field(discriminator="do"),
]
_STEPS = TypeAdapter(list[Step])


class Behaviour(BaseModel):
    """How a kind behaves beyond its steps (`[agents.<kind>]`): the real agents' start-up and screen habits."""

    model_config = _STRICT
    trust_dialog: bool = False  # the first start in a directory stops at the kind's trust dialog
    trust_focus_decline: bool = False  # the trust dialog opens with its cursor on the decline option (Claude Code 2.1.218 on)
    hooks: bool = True  # report state with `pane report-agent`; false: herdr knows it from its screen only
    title_spinner: bool = False  # set the kind's terminal title, with a spinner while working (always when hooks = false)
    idle_while_working: bool = False  # report idle during `run` steps while the busy line and title still spin
    first_start_delay_ms: int = Field(default=0, ge=0)  # a slow first start in a directory
    paste_collapse: bool = False  # show a multi-line paste as the kind's own placeholder


def scenario_path(env: dict[str, str]) -> Path | None:
    """The scenario file in force: $HERDR_SIM_SCENARIOS, else $HERDR_SIM_HOME/scenarios.toml if it exists."""
    if env.get("HERDR_SIM_SCENARIOS"):
        return Path(env["HERDR_SIM_SCENARIOS"])
    if env.get("HERDR_SIM_HOME"):
        candidate = Path(env["HERDR_SIM_HOME"]) / "scenarios.toml"
        if candidate.is_file():
            return candidate
    return None


def _table(path: Path, section: str, label: str) -> list[Step] | None:
    try:
        data = tomllib.loads(path.read_text())
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ScenarioError(f"cannot read scenario file {path}: {exc}") from None
    unknown = sorted(set(data) - {"task", "follow-up", "agents"})
    if unknown:
        raise ScenarioError(f"{path}: unknown top-level table [{unknown[0]}]")
    raw = data.get(section, {}).get(label)
    if raw is None:
        return None
    try:
        return _STEPS.validate_python(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"])
        raise ScenarioError(f"{path}: {section}.{label}[{where}]: {first['msg']}") from None


def default_task_steps() -> list[Step]:
    """The well-behaved worker: a small file inside the claim, a commit, real checks, a result."""
    return _STEPS.validate_python(
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
    return _STEPS.validate_python(
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
    return _STEPS.validate_python([{"do": "send", "kind": kind, "message": message}])


def load_behaviour(env: dict[str, str], kind: str) -> Behaviour:
    """The `[agents.<kind>]` table of the scenario file in force (read at start-up), else the cooperative default."""
    path = scenario_path(env)
    if path is None or not path.is_file():
        return Behaviour()
    try:
        raw = tomllib.loads(path.read_text()).get("agents", {}).get(kind, {})
        return Behaviour.model_validate(raw)
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ScenarioError(f"cannot read scenario file {path}: {exc}") from None
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"])
        raise ScenarioError(f"{path}: agents.{kind}.{where}: {first['msg']}") from None
