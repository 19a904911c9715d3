"""The run report (spec §7): verdict and compact block computed from the ledger alone, rendered as text or Markdown."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SerializerFunctionWrapHandler, model_serializer

from orchestrator.engine import Engine
from orchestrator.errors import ExitCode, OrchError
from orchestrator.integrate import held_why
from orchestrator.repeats import named_workers
from packets import inert_line
from packets.inert import markdown_code, markdown_fence
from registry import (
    CONTROLLER_HOST,
    Effect,
    EffectStatus,
    Event,
    EventKind,
    InboxMessage,
    InboxVerdict,
    Ledger,
    Run,
    RunVerdict,
    Worker,
    WorkerState,
)
from registry.facts import (
    host_workspaces,
    BaseMoved,
    Cause,
    Change,
    Dialog,
    EffectDecided,
    EffectRow,
    EffectSettled,
    EffectUnknown,
    FactKind,
    InboxRow,
    Integration,
    LadderEntry,
    Lost,
    MessageSent,
    Retained,
    RunFailed,
    SpoolLast,
    TabRenamed,
    Transcript,
    Verification,
    cause_of,
    read_fact,
    read_facts,
    read_row,
)
from registry.machine import LADDER_DONE, NOT_DISPATCHED, RESOLVING, UNACCEPTED

# --- what the report reads beyond the ledger's own journal kinds (the phases that write them must agree) ---------

# The controller's re-run of a worker's checks: the verify phase's transition out of verifying carries it in its cause
# (registry.facts.Verification: {"phase": "verify", "disposition", "reasons", "checks"}); a bare VERIFICATION fact is read
# the same way. Every other fact the report reads is a registry.facts.FactKind with its detail record.
VERIFY_PHASE = "verify"
# Moves that leave the run's work on a history the base no longer has: the person decides what to do with it.
BASE_LOST = frozenset({"rewritten", "deleted"})
# Effect kinds that close what a run created; a created item is closed when a confirmed one names it.
CLOSING_EFFECTS: Mapping[str, tuple[str, ...]] = {
    "pane": ("pane_close",),
    "worktree": ("worktree_remove",),
    # The retire ladder closes a leftover workspace by closing its last pane ({"workspace": …, "pane": …}).
    "workspace": ("workspace_close", "worktree_remove", "pane_close"),
}
# herdr closes a workspace that a cross-workspace `pane move` emptied (provision's pane_move effect names it in its
# response's closed_workspace_id): provision, retire and the report all say it in these words.
MOVED_OUT = "by herdr when its pane moved out"
# The integration worktree (orchestrator.integrate, an integration_worktree effect of the run) is removed by retire
# (a worktree_remove effect of the run, no task) once every worker is retired; retire and the report say its fate so.
INTEGRATION_REMOVED = "{branch} keeps its merges"
INTEGRATION_KEPT = "the integration worktree of {branch}: integration may merge more while workers wait or work; orch removes it once every worker is retired"
# The retire ladder's own account, in the cause of its retired/retained transition: {"items": [{"kind", "id", "action", "reason"}]}.
CLOSED_ACTIONS = frozenset({"closed", "removed", "gone"})
KEPT_ACTION = "kept"
# A ladder entry "gone" with a reason: the item was closed or removed outside orch (orchestrator.retire CLOSED_OUTSIDE).
GONE_ACTION = "gone"
# Keys of a transition's or fact's cause/detail that carry the human-readable evidence, in order of preference.
REASON_KEYS: tuple[str, ...] = ("reason", "evidence", "decision", "error", "question")
# A list of evidence sentences (the verify phase's cause), read when none of REASON_KEYS is there.
REASONS_KEY = "reasons"

# Exit code of `orch report` (and `orch run`) per verdict.
VERDICT_EXIT: Mapping[RunVerdict, ExitCode] = {
    RunVerdict.PASS: ExitCode.OK,
    RunVerdict.PARTIAL: ExitCode.VERDICT_PARTIAL,
    RunVerdict.FAIL: ExitCode.VERDICT_FAIL,
}



class _Model(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class _OnHost(_Model):
    """An item of one machine: its ``host`` field is said (printed, in JSON) only when it is not the controller's."""

    @model_serializer(mode="wrap")
    def _host_when_remote(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        data: dict[str, Any] = handler(self)
        if data.get("host") == CONTROLLER_HOST:
            del data["host"]  # a report of a run on one machine reads as it did before hosts existed
        return data


class Controller(_Model):
    """Where the controller sits: session/workspace/tab/pane (unknown parts are '-')."""

    session: str | None
    workspace: str | None
    tab: str | None
    pane: str
    seqs: tuple[int, ...]


class WorkerItem(_OnHost):
    """One worker's state and disposition; seqs: its last transition and integration facts."""

    task: str
    name: str
    kind: str
    state: WorkerState
    disposition: WorkerState | None
    integrated_sha: str | None
    seqs: tuple[int, ...]
    dialogs: tuple[str, ...] = ()  # start-up and approval dialogs: what was on screen and how it was answered (or not)
    transcript: str | None = None  # the terminal history saved before the pane closed
    host: str = CONTROLLER_HOST  # the machine it ran on (a plan host name); said only when not the controller


class WorkerCallbacks(_Model):
    """Accepted callbacks of one worker by kind; seqs: their inbox_recorded rows."""

    task: str
    name: str
    accepted: dict[str, int]
    unhandled: int
    missing_result: bool
    seqs: tuple[int, ...]


class KeptAsideItem(_Model):
    """A message kept aside (never acted on) with its reason."""

    inbox_id: int
    task: str | None
    sender: str | None
    kind: str | None
    reason_code: str | None
    reason: str | None
    seqs: tuple[int, ...]
    # A possible merge (orchestrator.repeats): the workers whose headers it holds, each asked to repeat; else empty.
    possible_merge: tuple[str, ...] = ()


class Callbacks(_Model):
    """The Callbacks line: per-worker accepted counts, kept-aside messages, workers without a result."""

    run_id: str
    workers: tuple[WorkerCallbacks, ...]
    kept_aside: tuple[KeptAsideItem, ...]


class CheckItem(_Model):
    """One check the controller re-ran, with its exit code (None: it could not run)."""

    command: str
    exit_code: int | None
    error: str | None = None


class VerificationItem(_Model):
    """The controller's latest verification of one worker (verified False: none recorded)."""

    task: str
    name: str
    verified: bool
    checks: tuple[CheckItem, ...]
    disposition: str | None
    reasons: tuple[str, ...]
    seqs: tuple[int, ...]
    checks_on: str | None = Field(default=None, exclude=True)  # the host its checks were re-run on, when not the controller


class RetiredItem(_OnHost):
    """One pane, worktree or workspace the run created: closed, retained with a reason, or still open."""

    task: str | None
    name: str | None
    what: Literal["pane", "worktree", "workspace"]
    id: str
    status: Literal["closed", "retained", "open", "gone"]  # gone: found closed or removed outside orch (reason says)
    reason: str | None
    seqs: tuple[int, ...]
    # The machine the id belongs to (its herdr numbered it, or the path is there); said only when not the controller's.
    host: str = CONTROLLER_HOST


BlockerKind = Literal["run_failed", "question", "blocked", "verification_blocked", "integration_paused", "integration_held", "failed", "in_flight", "skipped", "base_moved", "layout"]


class Blocker(_Model):
    """Something that needs a person: an open question or block, a verification block, paused integration, a failure."""

    task: str | None
    name: str | None
    kind: BlockerKind
    text: str
    seqs: tuple[int, ...]


class Wait(_Model):
    """An unresolved wait of one worker on the person, read from its history (whatever state retire left it in)."""

    kind: Literal["question", "blocked", "verification_blocked"]
    text: str
    seq: int


class Report(_Model):
    """The whole report; ``verdict_reasons`` says why the verdict is not PASS."""

    run_id: str
    run_status: str
    verdict: RunVerdict
    exit_code: int
    verdict_reasons: tuple[str, ...]
    integration_required: bool
    controller: Controller
    workers: tuple[WorkerItem, ...]
    callbacks: Callbacks
    verification: tuple[VerificationItem, ...]
    retired: tuple[RetiredItem, ...]
    blockers: tuple[Blocker, ...]
    base_moves: tuple[str, ...] = ()  # each time the base was found moved since preflight pinned it, in words
    # Each remote host the run's last collection of callbacks did not reach (orchestrator.spool.collect_last), in words.
    spools_kept: tuple[str, ...] = ()


# --- reading the journal -----------------------------------------------------------------------------------------


def _reason(source: Cause | Retained | RunFailed | LadderEntry | None) -> str | None:
    """The evidence sentence of a phase's cause, a fact or a ladder entry: the first of REASON_KEYS it has, else its list
    of reasons (the records name the sentence under different keys; each is read typed, this only picks the key)."""
    if not isinstance(source, Mapping):
        return None
    found: Mapping[str, object] = source
    for key in REASON_KEYS:
        value = found.get(key)
        if isinstance(value, str) and value.strip():
            return " ".join(value.split())
    # The verify phase records a list: a worker it blocked or rejected is explained by all of them.
    listed = found.get(REASONS_KEY)
    if isinstance(listed, list) and (texts := [" ".join(r.split()) for r in listed if isinstance(r, str) and r.strip()]):
        return "; ".join(texts)
    return None


def _mentions(value: Any, needle: str) -> bool:
    """Whether a JSON value holds the string ``needle`` anywhere (effect requests name ids under varying keys)."""
    if isinstance(value, str):
        return value == needle
    if isinstance(value, Mapping):
        return any(_mentions(v, needle) for v in value.values())
    if isinstance(value, (list, tuple)):
        return any(_mentions(v, needle) for v in value)
    return False


class _Journal:
    """Indexes over one run's events, so every report item can name the rows behind it."""

    def __init__(self, events: Sequence[Event]) -> None:
        self.events = events
        self.by_effect: dict[int, list[int]] = {}
        self.by_inbox: dict[int, list[int]] = {}
        for event in events:
            effect_id = _effect_of(event)
            if isinstance(effect_id, int):
                self.by_effect.setdefault(effect_id, []).append(event.seq)
            inbox_id = row.get("inbox_id") if (row := read_row(event, InboxRow)) is not None else None
            if isinstance(inbox_id, int):
                self.by_inbox.setdefault(inbox_id, []).append(event.seq)

    def of(self, task: str | None, kind: str) -> list[Event]:
        return [e for e in self.events if e.task_label == task and e.kind == kind]

    def last_into(self, task: str, state: WorkerState) -> Event | None:
        """The latest transition of the worker into ``state``."""
        found = [e for e in self.of(task, EventKind.TRANSITION) if e.to_state is state]
        return found[-1] if found else None

    def last_change(self, task: str, field: str) -> Event | None:
        """The latest row (transition or update) that set ``field`` on the worker."""
        found = [e for e in self.events if e.task_label == task and (change := read_row(e, Change)) is not None and field in change["changes"]]
        return found[-1] if found else None


def _effect_of(event: Event) -> int | None:
    """The effect a row is about: the ledger's rows of an effect, and the facts of its read-back (unknown, settled, decided)."""
    if (row := read_row(event, EffectRow)) is not None:
        return row.get("effect_id")
    for record in (EffectUnknown, EffectSettled, EffectDecided):
        if found := read_facts([event], record):
            return found[0].get("effect_id")
    return None


def open_wait(events: Sequence[Event], worker: Worker) -> Wait | None:
    """The worker's unresolved wait on the person, from its history: the last question, block or verification block
    not followed by an answer, a follow-up, a new result, a decision (stop, supersede, abandon) or a failure."""
    wait: Wait | None = None
    for event in events:
        if event.task_label != worker.task_label:
            continue
        change = read_row(event, Change)
        if event.kind == EventKind.TRANSITION and event.to_state is not None and change is not None:
            cause = change["cause"]
            if event.to_state is WorkerState.QUESTION or (event.to_state is WorkerState.BLOCKED and event.from_state is not WorkerState.VERIFYING):
                asked = change["changes"].get("pending_question")
                kind: Literal["question", "blocked"] = "question" if event.to_state is WorkerState.QUESTION else "blocked"
                wait = Wait(kind=kind, text=asked if isinstance(asked, str) and asked.strip() else "no text recorded", seq=event.seq)
            elif event.to_state is WorkerState.BLOCKED:
                wait = Wait(kind="verification_blocked", text=_reason(cause) or "no reason recorded", seq=event.seq)
            elif event.to_state in RESOLVING:
                wait = None
        elif event.kind == FactKind.ABANDONED or (event.kind == FactKind.MESSAGE_SENT and read_fact(event, MessageSent).get("kind") == "stop"):
            wait = None
        elif wait is not None and wait.kind != "verification_blocked" and change is not None:
            # A second question or block while the first is open replaces its text (inbox: update_worker).
            asked = change["changes"].get("pending_question")
            if isinstance(asked, str) and asked.strip():
                wait = wait.model_copy(update={"text": asked})
    return None if wait is None else wait.model_copy(update={"text": " ".join(wait.text.split())})


def _seqs(*events: Event | None) -> tuple[int, ...]:
    return tuple(sorted({e.seq for e in events if e is not None}))


# --- building ----------------------------------------------------------------------------------------------------


def _worker_item(worker: Worker, journal: _Journal) -> WorkerItem:
    transitions = journal.of(worker.task_label, EventKind.TRANSITION)
    added = journal.of(worker.task_label, EventKind.WORKER_ADDED)
    last = transitions[-1] if transitions else (added[-1] if added else None)
    integrated = journal.last_change(worker.task_label, "integrated_sha") if worker.integrated_sha else None
    dialogs = journal.of(worker.task_label, FactKind.DIALOG)
    transcripts = journal.of(worker.task_label, FactKind.TRANSCRIPT)
    transcript = read_facts(transcripts[-1:], Transcript)
    return WorkerItem(
        task=worker.task_label, name=worker.name, kind=worker.kind, state=worker.state,
        disposition=worker.final_disposition, integrated_sha=worker.integrated_sha,
        seqs=_seqs(last, integrated, *dialogs, *transcripts[-1:]), dialogs=tuple(_dialog_text(d) for d in read_facts(dialogs, Dialog)),
        transcript=str(transcript[0].get("path")) if transcript else None, host=worker.host,
    )  # fmt: skip


def _dialog_text(fact: Dialog) -> str:
    what = f"{fact.get('kind')} {fact.get('dialog') or 'unknown dialog'}"
    if fact.get("answered"):
        return f"{what} answered with {' '.join(fact.get('keys') or ())} ({fact.get('reason')})"
    return f"{what} not answered, nothing typed ({fact.get('reason')})"


def _controller(run: Run, journal: _Journal) -> Controller:
    # run_created names the pane; run_updated rows name its session, workspace and tab.
    rows = [
        e
        for e in journal.events
        if e.kind == EventKind.RUN_CREATED
        or (e.kind == EventKind.RUN_UPDATED and (change := read_row(e, Change)) is not None and {"session", "controller_workspace_id", "controller_tab_id"} & set(change["changes"]))
    ]
    return Controller(
        session=run.session, workspace=run.controller_workspace_id, tab=run.controller_tab_id, pane=run.controller_target,
        seqs=_seqs(*rows),
    )  # fmt: skip


def _callbacks(run: Run, workers: Sequence[Worker], inbox: Sequence[InboxMessage], journal: _Journal) -> Callbacks:
    items = []
    for worker in workers:
        mine = [m for m in inbox if m.verdict is InboxVerdict.ACCEPTED and m.task_label == worker.task_label]
        kinds = Counter(m.kind or "?" for m in mine)
        dispatched = worker.state not in NOT_DISPATCHED
        items.append(
            WorkerCallbacks(
                task=worker.task_label, name=worker.name, accepted=dict(kinds),
                unhandled=sum(1 for m in mine if m.handled_at is None),
                missing_result=dispatched and kinds["result"] == 0 and worker.final_disposition is not WorkerState.SUPERSEDED,
                seqs=tuple(sorted(s for m in mine for s in journal.by_inbox.get(m.id, []))),
            )
        )  # fmt: skip
    aside = tuple(
        KeptAsideItem(
            inbox_id=m.id, task=m.task_label, sender=m.sender, kind=m.kind, reason_code=m.reason_code,
            reason=m.reason, seqs=tuple(journal.by_inbox.get(m.id, [])), possible_merge=named_workers(run, list(workers), m.raw),
        )
        for m in inbox
        if m.verdict is InboxVerdict.KEPT_ASIDE
    )  # fmt: skip
    return Callbacks(run_id=run.run_id, workers=tuple(items), kept_aside=aside)


def _checks(found: Verification) -> tuple[CheckItem, ...]:
    raw = found.get("checks")
    if not isinstance(raw, list):
        return ()
    out = []
    for check in raw:
        if isinstance(check, Mapping) and isinstance(check.get("command"), str):
            code = check.get("exit_code")
            error = check.get("error")
            out.append(
                CheckItem(
                    command=check["command"],
                    exit_code=code if isinstance(code, int) and not isinstance(code, bool) else None,
                    error=error if isinstance(error, str) else None,
                )
            )
    return tuple(out)


def _verification_of(event: Event) -> Verification | None:
    if event.kind == FactKind.VERIFICATION:
        return read_fact(event, Verification)
    cause = cause_of(event) if event.kind == EventKind.TRANSITION else None
    if cause is not None and cause.get("phase") == VERIFY_PHASE and "disposition" in cause:
        return cause
    return None


def _verification(worker: Worker, journal: _Journal) -> VerificationItem:
    found = [(e, d) for e in journal.events if e.task_label == worker.task_label and (d := _verification_of(e)) is not None]
    if not found:
        return VerificationItem(
            task=worker.task_label, name=worker.name, verified=False, checks=(), disposition=None, reasons=(), seqs=()
        )
    fact, verification = found[-1]
    reasons = verification.get("reasons")
    disposition = verification.get("disposition")
    on = verification.get("checks_on")
    return VerificationItem(
        task=worker.task_label, name=worker.name, verified=True, checks=_checks(verification),
        disposition=disposition if isinstance(disposition, str) else None,
        reasons=tuple(r for r in reasons if isinstance(r, str)) if isinstance(reasons, list) else (),
        seqs=(fact.seq,), checks_on=on if isinstance(on, str) else None,
    )  # fmt: skip


def _retired(run: Run, workers: Sequence[Worker], effects: Sequence[Effect], journal: _Journal) -> tuple[RetiredItem, ...]:
    hosts = {w.task_label: w.host for w in workers}

    def host_of(task: str | None, request: Mapping[str, Any] | None = None) -> str:
        # An effect or fact of a worker on another host names that host's ids; a run-level one the controller's.
        return str((request or {}).get("host") or (hosts.get(task, CONTROLLER_HOST) if task else CONTROLLER_HOST))

    all_retained = [e for e in journal.events if e.kind == FactKind.RETAINED]
    every_effect = effects
    raw_items: list[RetiredItem] = []

    def settle(task: str | None, name: str | None, what: Literal["pane", "worktree", "workspace"], item: str, worker: Worker | None) -> None:
        # Ids are compared only with those of the same host: every herdr server numbers its panes from w1.
        host = worker.host if worker is not None else CONTROLLER_HOST
        effects = [e for e in every_effect if host_of(e.task_label, e.request) == host]
        retained_facts = [e for e in all_retained if host_of(e.task_label) == host]
        items = _Collect(raw_items, host)
        kinds = CLOSING_EFFECTS[what]
        moved = [e for e in effects if what == "workspace" and e.kind == "pane_move" and e.status is EffectStatus.CONFIRMED
                 and (e.response or {}).get("closed_workspace_id") == item]  # fmt: skip
        if moved:
            items.append(RetiredItem(task=task, name=name, what=what, id=item, status="closed", reason=MOVED_OUT, seqs=tuple(journal.by_effect.get(moved[-1].id, []))))
            return
        closing = [e for e in effects if e.kind in kinds and (_mentions(e.request, item) or _mentions(e.response, item))]
        if what == "worktree" and task is not None:
            # `worktree remove --workspace <id>` names the workspace, not the path: the task's own removal counts.
            closing += [e for e in effects if e.kind in kinds and e.task_label == task and e not in closing]
        done = [e for e in closing if e.status is EffectStatus.CONFIRMED]
        if done:
            items.append(RetiredItem(task=task, name=name, what=what, id=item, status="closed", reason=None, seqs=tuple(journal.by_effect.get(done[-1].id, []))))
            return
        lost = journal.last_into(worker.task_label, WorkerState.FAILED) if what == "pane" and worker is not None else None
        cause = cause_of(lost)
        if lost is not None and cause is not None and cause.get("phase") == "resume" and cause.get("lost") == Lost.PANE_CLOSED and cause.get("pane") == item:
            # `orch resume` found the worker's pane gone (herdr restarted, or it was closed, while orch was stopped,
            # orchestrator.run.reread_world): never "retained", whatever retire kept of the worker.
            why = "gone while orch was stopped (herdr restarted, or it was closed outside orch), not closed by this run"
            items.append(RetiredItem(task=task, name=name, what=what, id=item, status="gone", reason=why, seqs=(lost.seq,)))
            return
        kept = [e for e in retained_facts if read_fact(e, Retained).get("item") == item]
        if kept:
            items.append(RetiredItem(task=task, name=name, what=what, id=item, status="retained", reason=_reason(read_fact(kept[-1], Retained)) or "no reason recorded", seqs=(kept[-1].seq,)))
            return
        ladder = _ladder_item(journal, task, item)
        if ladder is not None:
            event, entry = ladder
            if entry.get("action") == GONE_ACTION and _reason(entry):
                # Closed or removed by someone else before the ladder came: said so, never credited to the run.
                items.append(RetiredItem(task=task, name=name, what=what, id=item, status="gone", reason=_reason(entry), seqs=(event.seq,)))
                return
            if entry.get("action") in CLOSED_ACTIONS:
                items.append(RetiredItem(task=task, name=name, what=what, id=item, status="closed", reason=None, seqs=(event.seq,)))
                return
            if entry.get("action") == KEPT_ACTION:
                items.append(RetiredItem(task=task, name=name, what=what, id=item, status="retained", reason=_reason(entry) or "no reason recorded", seqs=(event.seq,)))
                return
        if worker is None and item in (run.workspace_id, run.controller_workspace_id):
            # The retire ladder never closes the repo workspace or the controller's own workspace.
            why = "holds the controller" if item == run.controller_workspace_id else "the run's repo workspace"
            seqs = _seqs(*(e for e in journal.events if e.kind == EventKind.RUN_UPDATED and (change := read_row(e, Change)) is not None and _mentions(change["changes"], item)))
            items.append(RetiredItem(task=task, name=name, what=what, id=item, status="retained", reason=why, seqs=seqs))
            return
        into = journal.last_into(worker.task_label, WorkerState.RETAINED) if worker is not None and worker.state is WorkerState.RETAINED else None
        reason = _reason(cause_of(into))
        if into is not None and reason:
            items.append(RetiredItem(task=task, name=name, what=what, id=item, status="retained", reason=reason, seqs=(into.seq,)))
            return
        failed = [e for e in closing if e.status in (EffectStatus.FAILED, EffectStatus.ABANDONED)]
        if failed:
            error = " ".join((failed[-1].error or "").split()) or failed[-1].status.value
            seqs = tuple(journal.by_effect.get(failed[-1].id, []))
            items.append(RetiredItem(task=task, name=name, what=what, id=item, status="retained", reason=f"{failed[-1].kind} {failed[-1].status.value}: {error}", seqs=seqs))
            return
        live = f"worker is {worker.state.value}" if worker is not None and worker.state is not WorkerState.RETAINED else None
        items.append(RetiredItem(task=task, name=name, what=what, id=item, status="open", reason=live, seqs=()))

    for worker in workers:
        for pane in worker.created_pane_ids:
            settle(worker.task_label, worker.name, "pane", pane, worker)
        for path in worker.created_worktree_paths:
            settle(worker.task_label, worker.name, "worktree", path, worker)
        for workspace in worker.created_workspace_ids:
            settle(worker.task_label, worker.name, "workspace", workspace, worker)
    for workspace in run.created_workspace_ids:
        settle(None, None, "workspace", workspace, None)
    by_task = {w.task_label: w for w in workers}
    for opened in host_workspaces(journal.events).values():
        # Another host's primary-checkout workspace, opened there by a worker's first `worktree create`.
        if "workspace" in opened and (opener := by_task.get(opened["task"])) is not None:
            settle(opener.task_label, opener.name, "workspace", opened["workspace"], opener)
    home = [e for e in every_effect if host_of(e.task_label, e.request) == CONTROLLER_HOST]
    integration = _integration_item(home, [e for e in all_retained if host_of(e.task_label) == CONTROLLER_HOST], journal)
    return (*raw_items, integration) if integration is not None else tuple(raw_items)


class _Collect:
    """Retired items of one host: each is said to be that host's."""

    def __init__(self, into: list[RetiredItem], host: str) -> None:
        self.into, self.host = into, host

    def append(self, item: RetiredItem) -> None:
        self.into.append(item if self.host == CONTROLLER_HOST else item.model_copy(update={"host": self.host}))


def _integration_item(effects: Sequence[Effect], retained_facts: Sequence[Event], journal: _Journal) -> RetiredItem | None:
    """The integration worktree of the run's latest opening: removed by retire, kept with its reason, or still open."""
    opened = [e for e in effects if e.kind == "integration_worktree" and e.status is EffectStatus.CONFIRMED]
    if not opened:
        return None
    last = opened[-1]
    path, branch = str((last.response or {}).get("path") or last.request.get("path")), str(last.request.get("branch"))

    def item(status: Literal["closed", "retained", "open"], reason: str, seqs: tuple[int, ...]) -> RetiredItem:
        return RetiredItem(task=None, name=None, what="worktree", id=path, status=status, reason=reason, seqs=seqs)

    removed = [e for e in effects if e.kind == "worktree_remove" and e.task_label is None and e.request.get("path") == path
               and e.status is EffectStatus.CONFIRMED and e.id > last.id]  # fmt: skip
    if removed:
        return item("closed", INTEGRATION_REMOVED.format(branch=branch), tuple(journal.by_effect.get(removed[-1].id, [])))
    opened_at = min(journal.by_effect.get(last.id, [0]))
    kept = [e for e in retained_facts if read_fact(e, Retained).get("item") == path and e.seq > opened_at]
    if kept:
        return item("retained", _reason(read_fact(kept[-1], Retained)) or "no reason recorded", (kept[-1].seq,))
    return item("open", INTEGRATION_KEPT.format(branch=branch), tuple(journal.by_effect.get(last.id, [])))


def pane_fates(ledger: Ledger, run_id: str) -> dict[str, str]:
    """Each pane of the run that is no longer open, in words: ``closed`` (by the run) or ``closed outside orch``.

    From the ledger alone, like the report: the Retired items, and before retirement a worker failed because its pane
    was closed under it (orchestrator.observe: the failure's cause carries ``lost``).
    """
    run, workers = ledger.get_run(run_id), ledger.list_workers(run_id)
    journal = _Journal(ledger.events(run_id))
    fates: dict[str, str] = {}
    for worker in workers:
        into = journal.last_into(worker.task_label, WorkerState.FAILED)
        cause = cause_of(into)
        if worker.host == CONTROLLER_HOST and cause is not None and cause.get("lost") == Lost.PANE_CLOSED and isinstance(pane := cause.get("pane"), str):
            fates[pane] = "closed outside orch"
    for item in _retired(run, workers, ledger.list_effects(run_id), journal):
        if item.what == "pane" and item.status in ("closed", "gone") and item.host == CONTROLLER_HOST:
            # The controller's panes only (status shows no fate for a remote pane: its id may be a local one's).
            fates[item.id] = "closed" if item.status == "closed" else "closed outside orch"
    return fates


def _ladder_item(journal: _Journal, task: str | None, item: str) -> tuple[Event, LadderEntry] | None:
    """The retire ladder's last word on ``item``: an entry of its retired/retained transition's cause."""
    for event in reversed(journal.events):
        cause = cause_of(event)
        if event.kind != EventKind.TRANSITION or event.task_label != task or cause is None:
            continue
        if event.to_state not in LADDER_DONE:
            continue
        entries = cause.get("items")
        for entry in reversed(entries if isinstance(entries, list) else []):
            if isinstance(entry, Mapping) and entry.get("id") == item:
                return event, entry
    return None


def _blockers(workers: Sequence[Worker], effects: Sequence[Effect], journal: _Journal) -> tuple[Blocker, ...]:
    out = [
        Blocker(task=None, name=None, kind="run_failed", text=_reason(read_fact(e, RunFailed)) or "run failed (no reason recorded)", seqs=(e.seq,))
        for e in journal.events
        if e.kind == FactKind.RUN_FAILED
    ]
    for worker in workers:
        task = worker.task_label
        wait = open_wait(journal.events, worker)
        if wait is not None:
            asked = journal.last_change(task, "pending_question")
            seqs = tuple(sorted({wait.seq, *((asked.seq,) if asked is not None and asked.seq > wait.seq else ())}))
            out.append(Blocker(task=task, name=worker.name, kind=wait.kind, text=wait.text, seqs=seqs))
        if worker.state is WorkerState.SKIPPED or (worker.state is WorkerState.RETIRED and journal.last_into(task, WorkerState.SKIPPED)):
            # Never started: the scheduler's cause names the predecessor and the chain back to the one that ended.
            into = journal.last_into(task, WorkerState.SKIPPED)
            out.append(Blocker(task=task, name=worker.name, kind="skipped", text=_reason(cause_of(into)) or "a predecessor ended unaccepted", seqs=_seqs(into)))
        if WorkerState.FAILED in (worker.state, worker.final_disposition):
            into = journal.last_into(task, WorkerState.FAILED)
            text = _reason(cause_of(into)) or "no evidence recorded"
            # The unchanged check-ins behind a liveness failure are evidence too.
            check_ins = journal.of(task, EventKind.CHECK_IN)[-worker.unchanged_check_ins :] if worker.unchanged_check_ins else []
            out.append(Blocker(task=task, name=worker.name, kind="failed", text=text, seqs=_seqs(into, *check_ins)))
    out += _integration_blockers(workers, journal)
    names_by_task = {w.task_label: w.name for w in workers}
    out += [
        Blocker(task=e.task_label, name=names_by_task.get(e.task_label or ""), kind="layout", text=tab_renamed_text(read_fact(e, TabRenamed)), seqs=(e.seq,))
        for e in journal.events
        if e.kind == FactKind.TAB_RENAMED and not read_fact(e, TabRenamed).get("repaired")
    ]
    out += [
        Blocker(task=None, name=None, kind="base_moved", text=base_move_text(read_fact(e, BaseMoved)), seqs=(e.seq,))
        for e in journal.events
        if e.kind == FactKind.BASE_MOVED and read_fact(e, BaseMoved).get("how") in BASE_LOST
    ]
    names = {w.task_label: w.name for w in workers}
    for effect in effects:
        if effect.status is EffectStatus.INTENDED:
            who = names.get(effect.task_label or "", "run")
            out.append(
                Blocker(
                    task=effect.task_label, name=names.get(effect.task_label or ""), kind="in_flight",
                    text=f"effect #{effect.id} {effect.kind} ({who}) in flight, outcome unknown",
                    seqs=tuple(journal.by_effect.get(effect.id, [])),
                )
            )  # fmt: skip
    return tuple(out)


def tab_renamed_text(fact: TabRenamed) -> str:
    """A worker tab found renamed outside orch, in words, and what the read-back did about it."""
    tab, found, label = (str(fact.get(k) or "") for k in ("tab", "found", "label"))
    done = f"renamed back to '{label}'" if fact.get("repaired") else f"renaming it back to '{label}' failed: {fact.get('error') or 'no reason recorded'}"
    return f"tab {tab} was renamed outside orch to '{found}'; {done}"


def base_move_text(fact: BaseMoved) -> str:
    """One moved-base fact in words: what moved, how, and that every worker still started from the pinned commit."""
    base, pinned, now, how = (str(fact.get(k) or "") for k in ("base", "pinned", "now", "how"))
    where = {"fast-forward": f"fast-forward to {now[:12]}", "rewritten": f"rewritten: now {now[:12]}, which does not contain it", "deleted": "deleted"}.get(how, how)
    text = f"base {base} moved during the run (pinned at preflight as {pinned[:12]}; {where}); every worker started from {pinned[:12]}"
    if how in BASE_LOST:
        text += ", so the run's work is on a history the base no longer has: rebase it onto the new base before landing it"
    return text


def _integration_blockers(workers: Sequence[Worker], journal: _Journal) -> list[Blocker]:
    """What the latest integration held back and why (paused by a verification block, or stopped by a conflict),
    for the accepted work that is still not integrated."""
    found = [e for e in journal.events if e.kind == FactKind.INTEGRATION]
    if not found:
        return []
    last, fact = found[-1], read_fact(found[-1], Integration)
    by_task = {w.task_label: w for w in workers}
    out: list[Blocker] = []
    held = fact.get("held")
    for entry in held if isinstance(held, list) else []:
        if not isinstance(entry, Mapping) or not isinstance(entry.get("task"), str):
            continue
        worker = by_task.get(entry["task"])
        if worker is None or worker.integrated_sha:
            continue
        holders = [b for b in entry.get("by", []) if isinstance(b, str)]
        by = ", ".join(holders) or "a blocked worker"
        files = ", ".join(f for f in entry.get("files", []) if isinstance(f, str))
        if holders and all((h := by_task.get(b)) is not None and h.final_disposition in UNACCEPTED for b in holders):
            # Held by a sibling whose work was turned down (its commits are on this branch): no decision in this run
            # can change that, so it is said, not waited on; the branch keeps both workers' commits.
            # `orch integrate` again merges nothing more (the verified head still carries those commits, and the
            # verdicts are final): what the user can do is outside this run.
            text = (f"not merged: {held_why(holders, [f for f in entry.get('files', []) if isinstance(f, str)], ())}; orch merges none of it in "
                    f"this run: the user may merge {worker.task_label}'s own commits by hand, or have {by}'s work redone and accepted in a new run")
            out.append(Blocker(task=worker.task_label, name=worker.name, kind="integration_held", text=text, seqs=(last.seq,)))
            continue
        text = f"not merged: paused by {by}" + (f" (both change {files})" if files else "")
        out.append(Blocker(task=worker.task_label, name=worker.name, kind="integration_paused", text=text, seqs=(last.seq,)))
    unrelated = fact.get("unrelated")
    for task in unrelated if isinstance(unrelated, list) else []:
        if isinstance(task, str) and (worker := by_task.get(task)) is not None and not worker.integrated_sha:
            text = "not merged: its head does not descend from the run's pinned base (merging would join unrelated histories)"
            out.append(Blocker(task=task, name=worker.name, kind="integration_paused", text=text, seqs=(last.seq,)))
    stopped = fact.get("stopped_at")
    if isinstance(stopped, str) and (worker := by_task.get(stopped)) is not None and not worker.integrated_sha:
        conflicts = ", ".join(c for c in fact.get("conflicts", []) if isinstance(c, str)) or "the index"
        out.append(Blocker(task=stopped, name=worker.name, kind="integration_paused", text=f"merge conflict in {conflicts}: integration stopped here", seqs=(last.seq,)))
    return out


def _verdict(
    workers: Sequence[WorkerItem], retired: Sequence[RetiredItem], blockers: Sequence[Blocker], integration: bool
) -> tuple[RunVerdict, tuple[str, ...]]:
    """FAIL: the run failed, or every worker ended and none was accepted; PASS: everything accepted, retired or kept with
    a reason, no blockers; PARTIAL otherwise (including a run stopped while workers still wait for the person)."""
    run_failures = [b.text for b in blockers if b.kind == "run_failed"]
    if run_failures:
        return RunVerdict.FAIL, tuple(f"run failed: {text}" for text in run_failures)
    if not workers:
        return RunVerdict.FAIL, ("the run has no workers",)
    reasons: list[str] = []
    if not any(w.disposition is WorkerState.ACCEPTED for w in workers):
        # Nothing accepted is a failure only once no worker can still succeed: one still working, or waiting
        # for the person's answer, leaves the run unfinished (PARTIAL), not failed.
        skipped = {b.task for b in blockers if b.kind == "skipped"}
        if all(w.disposition is not None or w.task in skipped for w in workers):
            return RunVerdict.FAIL, ("no worker was accepted",)
        reasons.append("no worker accepted yet")
    for w in workers:
        if w.disposition is not WorkerState.ACCEPTED:
            reasons.append(f"{w.name} is {w.state.value}" + (f"/{w.disposition.value}" if w.disposition else "") + ", not accepted")
        elif integration and not w.integrated_sha:
            reasons.append(f"{w.name} is accepted but not integrated")
    for item in retired:
        if item.status == "open":
            owner = item.name or "run"
            reasons.append(f"{owner} {item.what} {item.id} is open" + (f" ({item.reason})" if item.reason else " with no reason recorded"))
    # Blocked and failed workers are already "not accepted" above; their evidence is on the Blockers line.
    reasons.extend(_blocker_text(b) for b in blockers if b.kind in ("question", "in_flight", "integration_paused", "base_moved"))
    return (RunVerdict.PARTIAL, tuple(reasons)) if reasons else (RunVerdict.PASS, ())


def build_report(ledger: Ledger, run_id: str, *, integration_required: bool = False) -> Report:
    """The report of one run from its ledger records; ``integration_required`` when the plan opted into integration."""
    run = ledger.get_run(run_id)
    workers = ledger.list_workers(run_id)
    journal = _Journal(ledger.events(run_id))
    inbox = ledger.list_inbox(run_id)
    effects = ledger.list_effects(run_id)
    worker_items = tuple(_worker_item(w, journal) for w in workers)
    retired = _retired(run, workers, effects, journal)
    blockers = _blockers(workers, effects, journal)
    verdict, reasons = _verdict(worker_items, retired, blockers, integration_required)
    return Report(
        run_id=run.run_id,
        run_status=run.status.value,
        verdict=verdict,
        exit_code=int(VERDICT_EXIT[verdict]),
        verdict_reasons=reasons,
        integration_required=integration_required,
        controller=_controller(run, journal),
        workers=worker_items,
        callbacks=_callbacks(run, workers, inbox, journal),
        verification=tuple(_verification(w, journal) for w in workers),
        retired=retired,
        blockers=blockers,
        base_moves=tuple(base_move_text(fact) for fact in read_facts(journal.events, BaseMoved)),
        spools_kept=_spools_kept(journal.events),
    )


def _spools_kept(events: Sequence[Event]) -> tuple[str, ...]:
    """The hosts whose last spool collection failed (a later one that reached the host clears it), in words."""
    from orchestrator.spool import kept_text

    last = {fact["host"]: fact.get("problem") for fact in read_facts(events, SpoolLast)}
    return tuple(kept_text(host, problem) for host, problem in sorted(last.items()) if problem is not None)


# --- rendering ---------------------------------------------------------------------------------------------------


def _join(parts: Iterable[str], empty: str) -> str:
    listed = list(parts)
    return "; ".join(listed) if listed else empty


def controller_text(controller: Controller) -> str:
    """``session/workspace/tab/pane``, '-' for what the ledger does not know."""
    return "/".join(part or "-" for part in (controller.session, controller.workspace, controller.tab, controller.pane))


def _worker_text(w: WorkerItem, skipped: bool = False) -> str:
    state = w.state.value if w.disposition is None or w.disposition is w.state else f"{w.state.value}/{w.disposition.value}"
    if skipped and w.state is not WorkerState.SKIPPED:
        state += "/skipped"  # retired since, but it never started
    where = f" on {w.host}" if w.host != CONTROLLER_HOST else ""
    return f"{w.name}={state}" + ("+integrated" if w.integrated_sha else "") + where


def _worker_callbacks_text(w: WorkerCallbacks) -> str:
    kinds = ", ".join(kind if n == 1 else f"{kind} x{n}" for kind, n in w.accepted.items())
    text = f"{sum(w.accepted.values())} accepted" + (f" ({kinds})" if kinds else "")
    return text + (f", {w.unhandled} unhandled" if w.unhandled else "")


# How much of one kept-aside message's explanation the Callbacks line quotes: it may hold a worker's header values,
# which have no length limit of their own (the whole explanation stays in the ledger and `orch inbox list`).
CALLBACK_REASON_CHARS = 200


def _cut(text: str, limit: int = CALLBACK_REASON_CHARS) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _callbacks_text(c: Callbacks) -> str:
    parts = [f"run {c.run_id}", *(f"{w.name} {_worker_callbacks_text(w)}" for w in c.workers)]
    if c.kept_aside:
        listed = ", ".join(
            f"#{k.inbox_id} {k.reason_code or '?'} ({_cut(k.reason or 'no reason')}"
            + (f"; possible merge of {', '.join(k.possible_merge)})" if k.possible_merge else ")")
            for k in c.kept_aside
        )
        parts.append(f"kept aside {len(c.kept_aside)}: {listed}")
    missing = [w.name for w in c.workers if w.missing_result]
    parts.append("missing result: " + (", ".join(missing) or "none"))
    return "; ".join(parts)


def _check_text(check: CheckItem) -> str:
    if check.exit_code is None:
        return f"`{check.command}` did not run" + (f" ({check.error})" if check.error else "")
    return f"`{check.command}` exit {check.exit_code}"


def _verification_text(v: VerificationItem, *, reasons: bool = True) -> str:
    if not v.verified:
        return f"{v.name}: not verified"
    checks = ", ".join(_check_text(c) for c in v.checks) or "no checks"
    where = f" on {v.checks_on}" if v.checks_on and v.checks else ""
    text = f"{v.name}: {checks}{where} -> {v.disposition or '?'}"
    # A disposition other than accepted is not evidence without its why (an exit 0 can still be blocked).
    return text + (f" ({'; '.join(' '.join(r.split()) for r in v.reasons)})" if reasons and v.reasons else "")


def _retired_text(r: RetiredItem) -> str:
    owner = r.name or "run"
    word = {"closed": "removed" if r.what == "worktree" else "closed", "retained": "retained", "open": "open", "gone": "gone"}[r.status]
    reason = r.reason if r.reason else ("no reason recorded" if r.status == "open" else None)
    where = f" on {r.host}" if r.host != CONTROLLER_HOST else ""
    return f"{owner} {r.what} {r.id}{where} {word}" + (f" ({reason})" if reason else "")


def _blocker_text(b: Blocker) -> str:
    if b.kind == "run_failed":
        return f"run failed: {b.text}"
    if b.kind in ("in_flight", "base_moved"):
        return b.text
    label = {"verification_blocked": "blocked by verification", "integration_paused": "integration paused"}.get(b.kind, b.kind)
    return f"{b.name} {label}: {b.text}"


def compact_lines(report: Report) -> list[str]:
    """The spec's seven lines (worker text in them made inert and kept on its line)."""
    lines = [
        f"Herdr: {report.verdict.value}",
        f"Controller: {controller_text(report.controller)}",
        "Workers: " + (", ".join(_worker_text(w, w.task in {b.task for b in report.blockers if b.kind == "skipped"}) for w in report.workers) or "none"),
        f"Callbacks: {_callbacks_text(report.callbacks)}",
        "Verification: " + _join((_verification_text(v) for v in report.verification), "none"),
        "Retired: " + _join((_retired_text(r) for r in report.retired), "nothing created"),
        "Blockers: " + _join((_blocker_text(b) for b in report.blockers), "none"),
    ]
    return [inert_line(line) for line in lines]


def render_report(report: Report) -> str:
    """The compact block, ending in a newline."""
    return "\n".join(compact_lines(report)) + "\n"


def _seq_text(seqs: Iterable[int]) -> str:
    listed = sorted(set(seqs))
    return ", ".join(f"#{s}" for s in listed) if listed else "none"


def render_markdown(report: Report, workers: Sequence[Worker], events: Sequence[Event] = ()) -> str:
    """`report.md`: the compact block, why the verdict is not PASS, and one detail section per worker.

    No Markdown structure comes from worker text: the compact block is one fenced code block, and every value that
    may carry text orch did not write itself (a question, reported checks, a command, a reason, a screen line) is an
    inert code span (`packets.inert.markdown_code`), so a worker's `# Herdr: PASS`, link, image, HTML or table
    renders as the characters it is.
    """
    code = markdown_code
    out = [f"# Herdr orchestration report: {report.run_id}", "", *markdown_fence(compact_lines(report)), ""]
    out += [f"Run status: {report.run_status}. Exit code: {report.exit_code}.", ""]
    # orch's own words about the base (refs and commit ids): plain
    out += [f"Base: {text}" for text in report.base_moves] + ([""] if report.base_moves else [])
    # orch's own words about a host and an ssh failure (the error text is the ssh client's, kept inert)
    out += [f"Spool: {code(text)}" for text in report.spools_kept] + ([""] if report.spools_kept else [])
    if report.verdict_reasons:
        out += [f"## Why {report.verdict.value}", "", *(f"- {code(r)}" for r in report.verdict_reasons), ""]
    by_task = {w.task_label: w for w in workers}
    for item in report.workers:
        worker = by_task[item.task]
        callbacks = next(c for c in report.callbacks.workers if c.task == item.task)
        verification = next(v for v in report.verification if v.task == item.task)
        retired = [r for r in report.retired if r.task == item.task]
        blockers = [b for b in report.blockers if b.task == item.task]
        out += [f"## {item.name} ({item.task})", ""]
        # On another machine its pane and worktree are that host's (issue 26); a worker on the controller says nothing.
        out.append(f"- Kind: {item.kind}" + (f"; host: {code(worker.host)}" if worker.host != CONTROLLER_HOST else ""))
        out.append(f"- State: {item.state.value}; disposition: {item.disposition.value if item.disposition else 'none'}")
        out.append(f"- Objective: {code(' '.join(worker.objective.split()))}")
        out.append(f"- Branch: {code(worker.branch or '-')}; worktree: {code(worker.worktree_path or '-')}; pane: {code(worker.pane_id or '-')}")
        out.append(f"- Base: {worker.base_sha or '-'}; head: {worker.head_sha or '-'}; integrated: {item.integrated_sha or 'no'}")
        missing = "; missing result" if callbacks.missing_result else ""
        out.append(f"- Callbacks: {_worker_callbacks_text(callbacks)}{missing}")
        out.append(f"- Reported checks: {code(' '.join((worker.reported_checks or 'none').split()))}")
        out.append(f"- Verification: {code(_verification_text(verification, reasons=False).split(': ', 1)[1])}")
        out += [f"  - {code(reason)}" for reason in verification.reasons]
        out.append(f"- Check-ins without change: {worker.unchanged_check_ins}")
        out.append("- Retired: " + _join((code(_retired_text(r)) for r in retired), "nothing created"))
        out.append("- Blockers: " + _join((code(_blocker_text(b)) for b in blockers), "none"))
        # Orch's own words (the quirk table's dialog names and answers) and its own file: no worker text.
        if item.dialogs:
            out.append("- Dialogs: " + "; ".join(item.dialogs))
        if item.transcript:
            out.append(f"- Transcript: {item.transcript}")
        renames = [tab_renamed_text(fact) for fact in read_facts((e for e in events if e.task_label == item.task), TabRenamed)]
        if renames:
            out.append("- Layout: " + "; ".join(code(r) for r in renames))  # a tab name anyone in a pane can set
        seqs = [*item.seqs, *callbacks.seqs, *verification.seqs, *(s for r in retired for s in r.seqs), *(s for b in blockers for s in b.seqs)]
        out += [f"- Ledger events: {_seq_text(seqs)}", ""]
    # Every entry is one line by design; worker text inside one (a question, a reason, reported checks) stays there.
    return "\n".join(inert_line(line) for line in out)


def integration_required(engine: Engine, run: Run) -> bool:
    """Whether the run's plan snapshot opted in to integration (a run without a snapshot cannot have)."""
    try:
        return engine.plan_for(run).plan.integration.enabled
    except OrchError:
        return False


def write_report(engine: Engine, run: Run) -> tuple[Report, str]:
    """Build the report from the ledger and (re)write it as Markdown to the run's report.md."""
    report = build_report(engine.ledger, run.run_id, integration_required=integration_required(engine, run))
    markdown = render_markdown(report, engine.ledger.list_workers(run.run_id), engine.ledger.events(run.run_id))
    path = engine.run_dir(run.run_id) / "report.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(markdown)
    return report, markdown
