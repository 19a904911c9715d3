"""Controller -> worker messages (answer, follow-up, stop) in the Message Contract envelope, and reading report paths safely."""

from __future__ import annotations

import hashlib
import os
import tempfile
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict

from orchestrator.engine import Engine
from orchestrator.errors import OrchError
from orchestrator.herdr_models import AgentPrompted
from orchestrator.inbox import SIM_REPORTS, report_roots
from packets import build_controller_message
from registry import Run, Worker, WorkerState

Kind = Literal["answer", "follow-up", "stop"]
S = WorkerState

REPORT_LIMIT_BYTES = 256 * 1024

# After a message is submitted, where the worker stands in the ledger (an answer resumes work; a follow-up is a new dispatch).
_AFTER: dict[str, dict[WorkerState, WorkerState]] = {
    "answer": {S.QUESTION: S.WORKING, S.BLOCKED: S.WORKING},
    "follow-up": {S.QUESTION: S.WORKING, S.BLOCKED: S.DISPATCHED, S.RESULT: S.DISPATCHED, S.REJECTED: S.DISPATCHED},
    "stop": {},
}


class SentMessage(BaseModel):
    """A message submitted to a worker (exit 0 of `herdr agent prompt`: submitted, nothing more)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    run_id: str
    task: str
    kind: Kind
    target: str
    text: str
    agent_status: str
    state: WorkerState


# A finished worker has nothing left to do in this run: a follow-up would start untracked work, a stop is moot.
# (retire's own stop goes to a worker in `retiring` whose agent is still busy, so that state stays open.)
_FINISHED: frozenset[WorkerState] = frozenset({S.ACCEPTED, S.RETAINED, S.RETIRED})


def _refuse(worker: Worker, kind: Kind) -> None:
    """Refuse, before any herdr call, a message the worker's state makes meaningless."""
    task, state = worker.task_label, worker.state
    if kind == "answer" and state not in (S.QUESTION, S.BLOCKED):
        raise OrchError(
            f"worker {task} asked nothing to answer (state {state})",
            hint=f"`orch answer` replies to a pending question or block; `orch send {task} --kind follow-up TEXT` sends new instructions",
        )
    if kind != "answer" and state in _FINISHED:
        raise OrchError(
            f"worker {task} is finished (state {state}); a {kind} would reach no task of this run",
            hint="`orch status` shows its disposition; give new work to a new run",
        )


def _target(worker: Worker) -> str:
    target = worker.reply_target or worker.pane_id
    if not target:
        raise OrchError(f"worker {worker.task_label} has no reply target yet (state {worker.state})")
    return target


def send_message(
    engine: Engine,
    run: Run,
    task: str,
    kind: Kind,
    body: str,
    *,
    urgent: bool = False,
    key: str | None = None,
    agent_status: str | None = None,
) -> SentMessage:
    """Send one answer, follow-up or stop to a worker's reply target, once per key, through `engine.once`.

    Only an idle or done worker gets a message, except a stop or an urgent follow-up (a scope correction),
    which may interrupt a working one. ``agent_status`` is a state the caller has just read (saves an `agent get`).
    """
    worker = engine.ledger.get_worker(run.run_id, task)
    text = build_controller_message(run_id=run.run_id, task_label=task, controller_target=run.controller_target, kind=kind, body=body)
    digest = hashlib.sha256(text.encode()).hexdigest()[:16]
    key = key or f"{task}:{kind}:{digest}"
    if engine.ledger.find_effect(run.run_id, key) is None:
        # The same message again (a re-run after success) replays its effect below; only a new one is judged by state.
        _refuse(worker, kind)
    target = _target(worker)
    status = agent_status or engine.herdr.agent_get(target).agent_status
    may_interrupt = kind == "stop" or (kind == "follow-up" and urgent)
    if status not in ("idle", "done") and not (may_interrupt and status == "working"):
        allowed = "idle, done or working" if may_interrupt else "idle or done"
        raise OrchError(
            f"worker {task} is {status} in herdr; a {kind} goes only to a worker that is {allowed}",
            hint="`orch observe --once` shows what it is doing; a stop or `--urgent` follow-up may interrupt a working worker",
        )
    prompted = engine.once(
        run.run_id,
        task,
        "agent_prompt",
        key,
        {"target": target, "kind": kind, "text": text},
        lambda: engine.herdr.agent_prompt(target, text),
        model=AgentPrompted,
    )
    after = _AFTER[kind].get(worker.state)
    if after is not None:
        changes = {"pending_question": None} if worker.state in (S.QUESTION, S.BLOCKED) else {}
        worker = engine.ledger.transition(
            run.run_id, task, worker.state, after, cause={"message": kind, "target": target}, **changes
        )
    else:
        engine.ledger.record_fact(run.run_id, "message_sent", task_label=task, detail={"kind": kind, "target": target, "text": text})
    return SentMessage(
        run_id=run.run_id, task=task, kind=kind, target=target, text=text,
        agent_status=prompted.agent.agent_status, state=worker.state,
    )  # fmt: skip


class ReportRead(BaseModel):
    """A report path a worker sent: its text when it is in an allowed place and small enough, else why it was not read."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    path: str
    text: str | None = None
    reason: str | None = None


def read_report(engine: Engine, run: Run, worker: Worker, path: str, *, limit: int = REPORT_LIMIT_BYTES) -> ReportRead:
    """Read a report path from a message, only inside the allowed roots (symlinks resolved) and up to ``limit`` bytes."""
    if not os.path.isabs(path):
        return ReportRead(path=path, reason="not an absolute path")
    real = Path(os.path.realpath(path))
    if not any(real.is_relative_to(root) for root in report_roots(engine, run, worker)):
        return ReportRead(path=path, reason=f"outside the worker's checkout, its report directory and {Path(tempfile.gettempdir()) / SIM_REPORTS}")
    try:
        size = real.stat().st_size
        if not real.is_file():
            return ReportRead(path=path, reason="not a regular file")
        if size > limit:
            return ReportRead(path=path, reason=f"{size} bytes, more than the {limit}-byte limit")
        return ReportRead(path=path, text=real.read_text(encoding="utf-8", errors="replace"))
    except OSError as exc:
        return ReportRead(path=path, reason=exc.strerror or type(exc).__name__)
