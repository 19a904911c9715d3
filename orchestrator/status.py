"""`orch status`: where a run and each of its workers stand right now, from the ledger alone (no colour, ever)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from pydantic import BaseModel, ConfigDict
from tabulate import tabulate

from orchestrator import tables
from orchestrator.repeats import named_workers
from orchestrator.report import pane_fates
from orchestrator.transcripts import transcript_of
from packets import inert_line
from orchestrator.held import waiting
from registry.facts import BaseMoved, FactKind, HostAnswered, read_fact, read_facts
from registry import CONTROLLER_HOST, Event, InboxMessage, InboxVerdict, Ledger, RunStatus, RunVerdict, Worker, WorkerState


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class WorkerStatus(_Model):
    """One worker's line."""

    task: str
    name: str
    kind: str
    state: WorkerState
    disposition: WorkerState | None
    pane: str | None
    # The plan host the worker runs on: its pane id is that host's herdr's ("local": the controller's).
    host: str = CONTROLLER_HOST
    pane_closed: str | None = None  # the pane is no longer open: "closed" (by the run) or "closed outside orch"
    last_callback_id: int | None
    last_callback_kind: str | None
    last_callback_at: datetime | None
    last_callback_age_s: int | None
    pending_question: str | None
    transcript: str | None = None  # the terminal history saved at retire (orchestrator/transcripts.py)
    # Its host did not answer while it was starting (orchestrator.held): held for a later check-in, or given up.
    host_note: str | None = None


class PossibleMergeLine(_Model):
    """A kept-aside prompt that held several workers' headers (orchestrator.repeats): its text, never acted on."""

    inbox_id: int
    tasks: tuple[str, ...]
    text: str


class RunStatusView(_Model):
    """A run's header and its workers' lines."""

    run_id: str
    status: RunStatus
    verdict: RunVerdict | None
    stopped_at: str | None
    controller: str
    repo: str | None
    repo_path: str | None
    base_ref: str | None
    base_sha: str | None
    workers: tuple[WorkerStatus, ...]
    base_moved: str | None = None  # how the base was last found moved since preflight pinned it (workers still start from the pin)
    possible_merges: tuple[PossibleMergeLine, ...] = ()


class RunSummary(_Model):
    """One line of `orch status --all`."""

    run_id: str
    status: RunStatus
    verdict: RunVerdict | None
    controller: str
    repo: str | None
    workers: int
    created_at: datetime


class RunList(_Model):
    """Every run in the ledger, oldest first."""

    runs: tuple[RunSummary, ...]


def age(seconds: int) -> str:
    """A short age: 45s, 3m05s, 2h10m, 3d04h."""
    seconds = max(0, seconds)
    minutes, secs = divmod(seconds, 60)
    hours, minutes = divmod(minutes, 60)
    days, hours = divmod(hours, 24)
    if days:
        return f"{days}d{hours:02d}h"
    if hours:
        return f"{hours}h{minutes:02d}m"
    if minutes:
        return f"{minutes}m{secs:02d}s"
    return f"{secs}s"


def _last_callback(worker: Worker, inbox: Sequence[InboxMessage]) -> InboxMessage | None:
    # The ledger's pointer wins; a phase that did not set it still leaves the accepted messages in the inbox.
    if worker.last_callback_id is not None:
        for message in inbox:
            if message.id == worker.last_callback_id:
                return message
    mine = [m for m in inbox if m.verdict is InboxVerdict.ACCEPTED and m.task_label == worker.task_label]
    return mine[-1] if mine else None


def build_status(ledger: Ledger, run_id: str, now: datetime) -> RunStatusView:
    """The status of one run at ``now``."""
    run = ledger.get_run(run_id)
    inbox = ledger.list_inbox(run_id)
    events = ledger.events(run_id)
    rows = []
    fates = pane_fates(ledger, run_id)
    now_held = waiting(ledger, run_id)  # held while starting, or lost while at work
    for worker in ledger.list_workers(run_id):
        last = _last_callback(worker, inbox)
        rows.append(
            WorkerStatus(
                task=worker.task_label, name=worker.name, kind=worker.kind, state=worker.state,
                disposition=worker.final_disposition, pane=worker.pane_id, host=worker.host,
                # The run's pane fates are the controller's herdr's panes (a remote pane's id may be the same).
                pane_closed=fates.get(worker.pane_id or "") if worker.host == CONTROLLER_HOST else None,
                last_callback_id=last.id if last else None, last_callback_kind=last.kind if last else None,
                last_callback_at=last.received_at if last else None,
                last_callback_age_s=int((now - last.received_at).total_seconds()) if last else None,
                pending_question=worker.pending_question, transcript=transcript_of(events, worker.task_label),
                host_note=now_held[worker.task_label].note() if worker.task_label in now_held else _given_up(events, worker),
            )
        )  # fmt: skip
    return RunStatusView(
        run_id=run.run_id, status=run.status, verdict=run.verdict, stopped_at=run.stopped_at,
        controller=_controller(run.session, run.controller_workspace_id, run.controller_tab_id, run.controller_target),
        repo=run.repo, repo_path=run.repo_path, base_ref=run.base_ref, base_sha=run.base_sha, workers=tuple(rows), base_moved=_base_moved(events),
        possible_merges=tuple(
            PossibleMergeLine(inbox_id=m.id, tasks=tasks, text=m.raw)
            for m in inbox
            if m.verdict is InboxVerdict.KEPT_ASIDE and (tasks := named_workers(run, ledger.list_workers(run_id), m.raw))
        ),
    )  # fmt: skip


def _given_up(events: Sequence[Event], worker: Worker) -> str | None:
    """Why a worker held for (or lost with) its host was given up (orchestrator.held.give_up), while it is still failed for it."""
    if worker.state is not WorkerState.FAILED:
        return None
    ends = [read_fact(e, HostAnswered) for e in events if e.kind == FactKind.HOST_ANSWERED and e.task_label == worker.task_label]
    reason = ends[-1].get("given_up") if ends else None
    return f"given up: {reason}" if reason else None


def _base_moved(events: Sequence[Event]) -> str | None:
    """The last move of the base the fetch gate noticed, in a few words: ``rewritten, now <sha>``."""
    moves = read_facts(events, BaseMoved)
    if not moves:
        return None
    how, now = str(moves[-1].get("how") or "moved"), str(moves[-1].get("now") or "")
    return f"{how}, now {now[:12]}" if now else how


def _controller(*parts: str | None) -> str:
    return "/".join(part or "-" for part in parts)


def build_run_list(ledger: Ledger) -> RunList:
    """Every run with its status, verdict and worker count."""
    return RunList(
        runs=tuple(
            RunSummary(
                run_id=run.run_id, status=run.status, verdict=run.verdict,
                controller=_controller(run.session, run.controller_workspace_id, run.controller_tab_id, run.controller_target),
                repo=run.repo, workers=len(ledger.list_workers(run.run_id)), created_at=run.created_at,
            )
            for run in ledger.list_runs()
        )
    )  # fmt: skip


MERGE_SHOWN = 240  # characters of a possible merge's text shown in `orch status`


def _one_line(text: str | None) -> str:
    # Worker text (a pending question): one cell of one row, inert before tabulate measures it.
    return inert_line(" ".join(text.split())) if text else "-"


def _pane(w: WorkerStatus) -> str:
    """The pane cell: its id, on which host when not the controller's, and its fate once closed."""
    if not w.pane:
        return "-"
    where = f"{w.pane} on {w.host}" if w.host != CONTROLLER_HOST else w.pane
    return f"{where} ({w.pane_closed})" if w.pane_closed else where


def render_status(view: RunStatusView, width: int | None = None) -> str:
    """Header lines, then one table row per worker (one block per worker when wider than ``width``), ending in a newline."""
    status = view.status.value + (f" ({view.verdict.value})" if view.verdict else "") + (f", stopped at {view.stopped_at}" if view.stopped_at else "")
    base = " ".join(part for part in (view.base_ref, view.base_sha[:12] if view.base_sha else None) if part) or "-"
    if view.base_moved:
        base += f" (pinned; the base moved during the run: {view.base_moved})"
    header = [
        ("run", view.run_id),
        ("status", status),
        ("controller", view.controller),
        ("repo", " ".join(part for part in (view.repo, view.repo_path) if part) or "-"),
        ("base", base),
    ]
    rows = [
        (
            w.task, w.name, w.kind, w.state.value, w.disposition.value if w.disposition else "-", _pane(w),
            f"{w.last_callback_kind or '?'} {age(w.last_callback_age_s or 0)} ago" if w.last_callback_id is not None else "-",
            _one_line(w.pending_question),
        )
        for w in view.workers
    ]  # fmt: skip
    table = (
        tables.table(rows, ("task", "name", "kind", "state", "disposition", "pane", "last callback", "question"), width)
        if rows
        else "no workers"
    )
    hosts = [f"  {w.task}: {_one_line(w.host_note)}" for w in view.workers if w.host_note]
    gone = ("\nhosts not answering:\n" + "\n".join(hosts) + "\n") if hosts else ""
    kept = [f"  {w.task}: {w.transcript}" for w in view.workers if w.transcript]
    transcripts = ("\ntranscripts:\n" + "\n".join(kept) + "\n") if kept else ""
    # Worker text, shown inert on one line and cut short: what was kept aside, for the person to see, never obeyed.
    merges = [f"  #{m.inbox_id} ({', '.join(m.tasks)}): {_one_line(m.text[:MERGE_SHOWN])}{'…' if len(m.text) > MERGE_SHOWN else ''}" for m in view.possible_merges]
    merged = ("\npossible merges, kept aside (the live workers they name asked to repeat; nothing in them acted on):\n" + "\n".join(merges) + "\n") if merges else ""
    return tabulate(header, tablefmt="plain") + "\n\n" + table + "\n" + gone + transcripts + merged


def render_run_list(runs: RunList, width: int | None = None) -> str:
    """One row per run (one block per run when wider than ``width``), ending in a newline."""
    if not runs.runs:
        return "no runs\n"
    rows = [
        (r.run_id, r.status.value, r.verdict.value if r.verdict else "-", r.controller, r.repo or "-", r.workers, f"{r.created_at:%Y-%m-%d %H:%M:%SZ}")
        for r in runs.runs
    ]
    return tables.table(rows, ("run", "status", "verdict", "controller", "repo", "workers", "created"), width) + "\n"
