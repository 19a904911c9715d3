"""`orch cancel RUN`: give up a whole run with retire's ladder (abandon semantics), keep every piece of work, report."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from orchestrator.engine import Engine
from orchestrator.errors import OrchError
from orchestrator.report import VERDICT_EXIT, Report, render_report, write_report
from orchestrator.retire import RetireResult, render_retire, retire
from registry.facts import Cancelled, FactKind
from registry import Run, RunStatus, WorkerState

DEFAULT_REASON = "the run was cancelled (orch cancel)"


class CancelResult(BaseModel):
    """What `orch cancel` did: the ladder's result for every worker, then the run's final report."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    run_id: str
    reason: str
    retire: RetireResult
    report: Report
    exit_code: int


def cancel_run(engine: Engine, run: Run, reason: str = DEFAULT_REASON) -> CancelResult:
    """Abandon every worker not yet retired, run retire's ladder on them, finish the run and write its report.

    Abandon semantics (orchestrator.retire): live workers become superseded, busy agents get the Message Contract's
    `stop`, agents at rest exit, panes the run created close. A checkout goes only when it holds nothing but commits
    on its own branch, which is never deleted; uncommitted or untracked work is always kept, and said.
    """
    if run.status is RunStatus.FINISHED:
        raise OrchError(f"run {run.run_id} is already finished", hint=f"`orch report --run {run.run_id}` shows its report")
    reason = reason.strip() or DEFAULT_REASON
    ledger = engine.ledger
    abandon = {w.task_label: reason for w in ledger.list_workers(run.run_id) if w.state is not WorkerState.RETIRED}
    ledger.record_fact(run.run_id, FactKind.CANCELLED, detail=Cancelled(reason=reason, workers=sorted(abandon)))
    retired = retire(engine, run, abandon=abandon)
    verdict = write_report(engine, run)[0].verdict
    finished = ledger.set_run_status(run.run_id, RunStatus.FINISHED, stopped_at="cancelled", verdict=verdict)
    report, _ = write_report(engine, finished)  # again, so report.md shows the run finished
    return CancelResult(run_id=run.run_id, reason=reason, retire=retired, report=report, exit_code=int(VERDICT_EXIT[report.verdict]))


def render_cancel(result: CancelResult) -> str:
    """What the ladder did with each worker (closed, kept and why), then the compact report."""
    return f"cancelled run {result.run_id}: {result.reason}\n" + render_retire(result.retire) + "\n" + render_report(result.report)
