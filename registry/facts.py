"""The facts the engine journals beside the ledger's own rows: each kind once, with the detail fields it carries.

A fact is a journal row (`Ledger.record_fact`, or `update_worker(fact=…)` for one that also changes a worker's
fields) whose kind is a `FactKind` and whose detail is the kind's record below. The records are TypedDicts: plain
dicts at run time (the journal stores JSON, and a worker's callback must stay free of pydantic), checked by mypy where
they are built, and read back typed through one reader, `read_fact(event, Record)` (or `read_facts(events, Record)` for
every fact of that kind), never by string-indexing `Event.detail`. Older ledgers may lack a field added later: such
fields are `NotRequired` and read with `.get`. `tests/registry/test_facts.py` keeps the table whole: every kind has
its record and none is a journal kind the ledger writes itself.

The ledger's own journal rows (`registry.kinds.EventKind`) have their records here too (`ROWS`), read with
`read_row(event, Record)`: a change of a run's or worker's fields (`Change`: the phase's `Cause` and the new values),
an effect's row, an inbox message's row, a run's status, a check-in. No module reads `Event.detail` by string keys
(`tests/registry/test_facts.py`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from enum import StrEnum
from typing import Any, NotRequired, Protocol, TypedDict, TypeVar, cast

from registry.errors import RegistryError
from registry.kinds import EventKind


class FactKind(StrEnum):
    """Every fact kind the engine records (the ledger's own kinds are `registry.kinds.EventKind`)."""

    # A worker's callback fields recorded without a move (update_worker; detail {"cause": CallbackCause, "changes"}).
    CALLBACK = "callback"
    # Accepted work landed on the integration branch (update_worker with integrated_sha; detail {"cause": IntegratedCause, "changes"}).
    INTEGRATED = "integrated"
    VERIFICATION = "verification"
    RETAINED = "retained"
    RUN_FAILED = "run_failed"
    ABANDONED = "abandoned"
    CANCELLED = "cancelled"
    MESSAGE_SENT = "message_sent"
    INTEGRATION = "integration"
    INTEGRATION_CONFLICT = "integration_conflict"
    DIALOG = "dialog"
    PLAN_MODE = "plan_mode"
    TRANSCRIPT = "transcript"
    BASE_MOVED = "base_moved"
    TAB_RENAMED = "tab_renamed"
    AGENT_EXITED = "agent_exited"
    PLANNED_ANSWER_UNSENT = "planned_answer_unsent"
    REPORT = "report"
    RESUME_COMMAND = "resume_command"
    DISPATCH_DIAGNOSIS = "dispatch_diagnosis"
    EFFECT_UNKNOWN = "effect_unknown"
    EFFECT_SETTLED = "effect_settled"
    EFFECT_DECIDED = "effect_decided"
    HERDR_LOST_PANES = "herdr_lost_panes"
    # herdr lost what started a worker before any packet was sent (a restart): it is started again, under new keys.
    RESTARTED = "restarted"
    # Provisioning is about to create `<repo>.worktrees/` (it did not exist): retire removes it again once empty.
    WORKTREES_FOLDER = "worktrees_folder"
    # A run's last collection of a remote host's spool (before it is judged) reached that host, or not (its messages wait there).
    SPOOL_LAST = "spool_last"
    # A worker still starting (provisioning or ready) met its host unreachable: held, not failed; later check-ins try again.
    HOST_HELD = "host_held"
    # A held worker's host answered again: its start goes on (or it was given up at the end of the run, ``given_up``).
    HOST_ANSWERED = "host_answered"
    # The first checkout orch makes on another host opens its primary checkout's workspace there (herdr opens a
    # worktree group's parent with it when none is open): retire closes it again once it holds only that shell.
    HOST_WORKSPACE = "host_workspace"


class CallbackCause(TypedDict):
    """Why an accepted callback changed its worker's fields (also the cause of the transition it made, if any)."""

    inbox_id: int
    kind: str


class IntegratedCause(TypedDict):
    """How `orch integrate` proved a worker's head landed on the integration branch."""

    phase: str  # "integrate"
    head_sha: str
    into: str
    proof: str  # "merge-base --is-ancestor"


class Check(TypedDict):
    """One of the plan's verification commands as the controller re-ran it."""

    command: str
    exit_code: int | None
    error: NotRequired[str | None]


class Verification(TypedDict, total=False):
    """The controller's re-run of a worker's checks (the verify phase's transition cause has the same keys)."""

    phase: str
    disposition: str
    reasons: list[str]
    checks: list[Check]
    checks_on: str  # the worker's host, when the plan re-ran its checks there (`verify_on = "host"`); absent: the controller


class LadderEntry(TypedDict):
    """What the retire ladder did with one thing (its retired or retained transition's cause lists them as ``items``)."""

    kind: str  # agent, pane, worktree, workspace
    id: str
    action: str  # closed, removed, gone, kept, exited…
    reason: NotRequired[str | None]


class Cause(TypedDict, total=False):
    """Why a phase changed a run's or a worker's fields (a `Change`'s cause): each phase sets the keys it has, and an
    older ledger may lack any, so every key is read with `.get`."""

    phase: str
    step: str
    # The evidence sentence, under the key its phase uses (orchestrator.report.REASON_KEYS reads them in order).
    reason: str
    evidence: str
    decision: str
    error: str
    question: str
    # An accepted callback (CallbackCause).
    inbox_id: int
    kind: str
    # The verify phase (a VERIFICATION fact's keys, and who decided).
    decided_by: str
    disposition: str
    reasons: list[str]
    head_sha: str | None
    checks: list[Check]
    checks_on: str
    # The retire ladder.
    items: list[LadderEntry]
    # A worker lost from outside orch: how (LOST, a `Lost`), and the pane it had.
    lost: str
    pane: str
    # An approval form a blocked worker waits at: its name in the quirk table, and the screen that showed it.
    approval: str
    screen: str


class Retained(TypedDict):
    """A created item deliberately kept open (the person asked, it waits on the person, evidence unresolved)."""

    item: str  # a pane id, worktree path, workspace id, or the task label
    what: NotRequired[str]  # pane, worktree, workspace, worker
    reason: str | None


class RunFailed(TypedDict):
    """The run itself could not proceed (preflight, the fetch gate)."""

    reason: str


class Abandoned(TypedDict):
    """The person gave the work up (`orch retire --abandon`, `orch cancel`)."""

    reason: str
    state: NotRequired[str]  # the worker's state when it was given up


class Cancelled(TypedDict):
    """`orch cancel`: the whole run given up, and which workers that abandoned."""

    reason: str
    workers: list[str]


class MessageSent(TypedDict):
    """A controller message that moved no state; a `stop` is the person's decision on a question or block."""

    kind: str  # answer, follow-up, stop
    target: str
    text: str


class Held(TypedDict):
    """Accepted work integration holds back, and the blocked workers whose files it overlaps."""

    task: str
    by: list[str]
    files: list[str]


class Integration(TypedDict):
    """What one `orch integrate` with integration enabled held back or stopped at (the latest one holds)."""

    paused_by: list[str]
    held: list[Held]
    stopped_at: str | None
    conflicts: list[str]
    unrelated: NotRequired[list[str]]


class IntegrationConflict(TypedDict):
    """A merge into the integration branch that conflicted and was aborted."""

    head_sha: str
    into: str
    paths: list[str]
    aborted: bool


class Dialog(TypedDict):
    """A dialog on an agent's screen and what orch did about it."""

    dialog: str | None  # the quirk table's name for it; None: not one orch knows
    kind: str  # the agent kind
    answered: bool
    keys: NotRequired[list[str]]
    reason: str
    screen: str | None


class PlanMode(TypedDict):
    """The keys pressed to leave an agent's plan mode before its packet."""

    presses: int
    confirm_text: str | None


class Transcript(TypedDict):
    """A worker's terminal history saved before retire exits its agent."""

    path: str
    pane: str
    lines: int


class BaseMoved(TypedDict):
    """The base ref no longer names the commit preflight pinned (the provision fetch gate)."""

    base: str
    pinned: str
    now: str | None
    how: str  # fast-forward, rewritten, deleted
    noticed_by: str


class TabRenamed(TypedDict):
    """A worker tab found renamed outside orch, and whether `tab rename` put the Layout Contract's label back."""

    tab: str
    found: str
    label: str
    repaired: bool
    error: NotRequired[str]


class AgentExited(TypedDict):
    """A finished worker's agent left its pane to free its slot (pane and checkout stay for the ladder)."""

    pane: str | None
    disposition: str | None
    how: str  # the exit command typed, or "no agent in its pane"


class PlannedAnswerUnsent(TypedDict):
    """One failed send of a planned answer to a worker's question."""

    inbox_id: int
    error: str
    person: bool  # the person must answer now (the tries are used up or herdr refused for good)
    gone: NotRequired[bool]  # the worker's agent is gone: it was failed


class Report(TypedDict):
    """A report file a result named, as orch read it (or why it did not)."""

    inbox_id: int
    path: str
    text: str | None
    reason: str | None


class ResumeCommand(TypedDict):
    """A worker's resume command reported to herdr (herdr 0.9.2+), once per agent session."""

    session: str
    argv: list[str]
    pane_id: str
    error: NotRequired[str]


class DispatchDiagnosis(TypedDict):
    """A packet prompt with no state change in time: its outcome and what one read of the pane shows."""

    effect: str
    outcome: dict[str, object]
    suggests: str
    summary: str
    last_lines: list[str]


class EffectUnknown(TypedDict):
    """A herdr side effect that got no answer: only read-back may say whether it happened."""

    effect_id: int
    kind: str
    key: str
    error: str
    message: str


class EffectSettled(TypedDict):
    """How read-back decided an in-flight effect."""

    effect_id: int
    kind: str
    key: str
    answer: str
    how: str


class EffectDecided(TypedDict):
    """A person's answer to a prompt read-back could not decide (`orch resume --settle`)."""

    effect_id: int
    answer: str  # sent, unsent


class HerdrLostPanes(TypedDict):
    """Panes herdr no longer has at resume (herdr restarted, or they were closed, while orch was stopped)."""

    workspace_id: str | None
    workspace_gone: bool
    lines: list[str]


class Restarted(TypedDict):
    """A worker started again at resume: herdr lost its pane (or the run's workspace) before any packet was sent."""

    start: int  # which start this is (the first is 1: it has no fact)
    state: str  # where the first start had got: provisioning or ready
    pane: str | None  # the pane herdr no longer has, if it had one
    reason: str


class WorktreesFolder(TypedDict):
    """`<repo>.worktrees/` beside the checkout, which the run's first checkout creates (on ``host`` when another
    host's: a path there)."""

    path: str
    host: NotRequired[str]


class HostWorkspace(TypedDict):
    """The workspace of ``checkout`` (another host's primary checkout), not open before ``task``'s ``worktree create``
    there: recorded without ``workspace`` before the create, then with the id ``worktree list`` reads back after it."""

    host: str
    task: str
    checkout: str
    workspace: NotRequired[str]


class SpoolLast(TypedDict):
    """The last collection of a remote host's spool before the run was judged: ``problem`` when it was not collected."""

    host: str
    problem: str | None


class HostHeld(TypedDict):
    """A worker waiting for its host: starting and held (``stage`` provision or dispatch), or at work and lost (``work``)."""

    host: str
    stage: str
    error: str


class HostAnswered(TypedDict):
    """A held worker released: its host answered (``given_up`` None), or the run ended first (``given_up`` the reason)."""

    host: str
    given_up: str | None


# --- the ledger's own journal rows (registry.kinds.EventKind) ---------------------------------------------------------


class Change(TypedDict):
    """A row that changed a run's or a worker's fields: why (the phase's cause) and the new values as JSON holds them."""

    cause: Cause
    changes: dict[str, Any]


class EffectRow(TypedDict):
    """An effect's row: intended (with its request), confirmed, failed or abandoned (with the settled columns)."""

    effect_id: int
    kind: str
    key: str


class InboxRow(TypedDict):
    """An inbound message's row: recorded (with its verdict, task, kind, sender and source) or handled."""

    inbox_id: int
    verdict: NotRequired[str]
    task: NotRequired[str | None]
    kind: NotRequired[str | None]
    sender: NotRequired[str | None]
    source: NotRequired[str]


class RunCreated(TypedDict):
    """A run's first row."""

    controller_target: str


# A run's status moved: from and to are status values (keywords of Python, hence this spelling of the record).
RunStatusChanged = TypedDict("RunStatusChanged", {"from": str, "to": str, "stopped_at": str | None, "verdict": str | None})


class CheckIn(TypedDict):
    """One check-in of a worker that saw no state change since ``state_change_seq``."""

    state_change_seq: int | None
    unchanged_check_ins: int


# The record of each of the ledger's own kinds, and the facts written with `update_worker(fact=…)` (their row is a
# Change too): what `read_row` reads.
ROWS: Mapping[type, frozenset[str]] = {
    Change: frozenset({EventKind.TRANSITION, EventKind.WORKER_ADDED, EventKind.WORKER_UPDATED, EventKind.RUN_UPDATED, FactKind.CALLBACK, FactKind.INTEGRATED}),
    EffectRow: frozenset({EventKind.EFFECT_INTENDED, EventKind.EFFECT_CONFIRMED, EventKind.EFFECT_FAILED, EventKind.EFFECT_ABANDONED}),
    InboxRow: frozenset({EventKind.INBOX_RECORDED, EventKind.INBOX_HANDLED}),
    RunCreated: frozenset({EventKind.RUN_CREATED}),
    RunStatusChanged: frozenset({EventKind.RUN_STATUS}),
    CheckIn: frozenset({EventKind.CHECK_IN}),
}


# The detail record of each kind: what a writer builds and a reader may expect.
DETAILS: Mapping[FactKind, type] = {
    FactKind.CALLBACK: CallbackCause,
    FactKind.INTEGRATED: IntegratedCause,
    FactKind.VERIFICATION: Verification,
    FactKind.RETAINED: Retained,
    FactKind.RUN_FAILED: RunFailed,
    FactKind.ABANDONED: Abandoned,
    FactKind.CANCELLED: Cancelled,
    FactKind.MESSAGE_SENT: MessageSent,
    FactKind.INTEGRATION: Integration,
    FactKind.INTEGRATION_CONFLICT: IntegrationConflict,
    FactKind.DIALOG: Dialog,
    FactKind.PLAN_MODE: PlanMode,
    FactKind.TRANSCRIPT: Transcript,
    FactKind.BASE_MOVED: BaseMoved,
    FactKind.TAB_RENAMED: TabRenamed,
    FactKind.AGENT_EXITED: AgentExited,
    FactKind.PLANNED_ANSWER_UNSENT: PlannedAnswerUnsent,
    FactKind.REPORT: Report,
    FactKind.RESUME_COMMAND: ResumeCommand,
    FactKind.DISPATCH_DIAGNOSIS: DispatchDiagnosis,
    FactKind.EFFECT_UNKNOWN: EffectUnknown,
    FactKind.EFFECT_SETTLED: EffectSettled,
    FactKind.EFFECT_DECIDED: EffectDecided,
    FactKind.HERDR_LOST_PANES: HerdrLostPanes,
    FactKind.RESTARTED: Restarted,
    FactKind.WORKTREES_FOLDER: WorktreesFolder,
    FactKind.SPOOL_LAST: SpoolLast,
    FactKind.HOST_HELD: HostHeld,
    FactKind.HOST_ANSWERED: HostAnswered,
    FactKind.HOST_WORKSPACE: HostWorkspace,
}


# The kinds written with `update_worker(fact=…)`: their row's detail is {"cause": record, "changes": …}.
_IN_CAUSE = frozenset({FactKind.CALLBACK, FactKind.INTEGRATED})
_KIND_OF: Mapping[type, FactKind] = {record: kind for kind, record in DETAILS.items()}
T = TypeVar("T")


class Journalled(Protocol):
    """What the fact reader needs of a journal row (`registry.records.Event`)."""

    @property
    def kind(self) -> str: ...

    @property
    def detail(self) -> dict[str, Any]: ...


def read_fact(event: Journalled, record: type[T]) -> T:
    """The fact's detail as its kind's record (``record`` names the kind, DETAILS); a RegistryError for another kind."""
    kind = _KIND_OF[record]
    if event.kind != kind:
        raise RegistryError(f"journal row is a {event.kind}, not a {kind} fact")
    return cast(T, event.detail.get("cause", {}) if kind in _IN_CAUSE else event.detail)


def read_facts(events: Iterable[Journalled], record: type[T]) -> list[T]:
    """The detail of every fact of ``record``'s kind among events, in their order."""
    kind = _KIND_OF[record]
    return [read_fact(event, record) for event in events if event.kind == kind]


def host_workspaces(events: Iterable[Journalled]) -> dict[str, HostWorkspace]:
    """Each host's last ``host_workspace`` fact (the one with the workspace's id once provisioning read it back)."""
    return {fact["host"]: fact for fact in read_facts(events, HostWorkspace)}


def read_row(event: Journalled | None, record: type[T]) -> T | None:
    """The row's detail as ``record`` (one of ROWS) when the row is of one of its kinds, else None. A Change always has
    its ``cause`` and ``changes`` (empty when an older row lacks them)."""
    if event is None or event.kind not in ROWS[record]:
        return None
    if record is Change:
        return cast(T, {"cause": event.detail.get("cause") or {}, "changes": event.detail.get("changes") or {}})
    return cast(T, event.detail)


def cause_of(event: Journalled | None) -> Cause | None:
    """The cause of a row that changed a run's or a worker's fields (a transition, an update), else None."""
    change = read_row(event, Change)
    return change["cause"] if change is not None else None


# A worker failed because something outside orch took its pane, agent or worktree (a person's hands, a herdr restart):
# its failure's transition cause carries {LOST: how, "pane": id}, which the report and `orch status` read.
LOST = "lost"


class Lost(StrEnum):
    """How a worker was lost from outside orch (the value of a failure cause's LOST key)."""

    PANE_CLOSED = "pane_closed"
    AGENT_EXITED = "agent_exited"
    WORKTREE_REMOVED = "worktree_removed"
    WORKTREE_SWITCHED = "worktree_switched"
