"""Frozen pydantic records the ledger hands out (runs, workers, events, inbox messages, effects), and run ids."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict

from registry.kinds import CONTROLLER_HOST, EffectStatus, InboxVerdict, RunStatus, RunVerdict
from registry.machine import WorkerState


def as_utc(value: datetime) -> datetime:
    """The same instant in UTC; naive datetimes are refused."""
    # Naive datetimes are ambiguous across controller processes; the ledger only speaks UTC.
    if value.tzinfo is None or value.utcoffset() is None:
        raise ValueError("timestamp must be timezone-aware")
    return value.astimezone(UTC)


UtcDatetime = Annotated[datetime, AfterValidator(as_utc)]


def make_run_id(controller_pane: str, at: datetime) -> str:
    """The spec's run id, `${controller_pane}-${UTC yyyymmddTHHMMSSZ}`, e.g. `w1:p1-20261130T080000Z`."""
    if not controller_pane or any(ch.isspace() for ch in controller_pane):
        raise ValueError(f"controller pane id must be non-empty without whitespace, got {controller_pane!r}")
    return f"{controller_pane}-{as_utc(at):%Y%m%dT%H%M%SZ}"


class _Record(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Run(_Record):
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
    created_at: UtcDatetime
    updated_at: UtcDatetime
    workspace_id: str | None = None
    repo_tab_id: str | None = None
    controller_workspace_id: str | None = None
    controller_tab_id: str | None = None
    default_branch: str | None = None
    created_workspace_ids: tuple[str, ...] = ()
    controller_kind: Literal["agent", "run"] = "agent"


class Worker(_Record):
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
    created_at: UtcDatetime
    updated_at: UtcDatetime


class Event(_Record):
    """One append-only journal row: a state change or a recorded fact."""

    seq: int
    run_id: str
    task_label: str | None
    at: UtcDatetime
    kind: str
    from_state: WorkerState | None
    to_state: WorkerState | None
    detail: dict[str, Any]


class InboxMessage(_Record):
    """One inbound message exactly as received, with the validation verdict it got."""

    id: int
    run_id: str
    received_at: UtcDatetime
    source: str
    raw: str
    verdict: InboxVerdict
    reason_code: str | None
    reason: str | None
    task_label: str | None
    kind: str | None
    sender: str | None
    fingerprint: str
    handled_at: UtcDatetime | None


class Effect(_Record):
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
    intended_at: UtcDatetime
    settled_at: UtcDatetime | None
    # Not stored: True only on the row intend() has just created, so exactly one caller (of all processes)
    # owns making the call; everyone else got an existing row and must settle it by read-back, not repeat it.
    is_new: bool = False
