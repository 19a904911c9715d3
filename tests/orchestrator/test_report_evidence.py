"""The report explains a worker verification did not accept: its reasons on the Verification line and, when blocked, on Blockers."""

from __future__ import annotations

from pathlib import Path

from orchestrator.report import build_report, render_report
from registry import Ledger, WorkerState

S = WorkerState
RUN = "w1:p1-20260101T120000Z"


def verified(ledger: Ledger, task: str, command: str, exit_code: int, disposition: S, reasons: list[str]) -> None:
    """A dispatched worker with a result, then the verify phase's transition exactly as orchestrator.verify writes it."""
    ledger.add_worker(RUN, task, name=task, kind="codex", objective="Do it.", claimed_files=(f"src/{task}/",), branch=f"feat/{task}")
    for before, after in ((S.PROVISIONING, S.READY), (S.READY, S.DISPATCHED), (S.DISPATCHED, S.RESULT), (S.RESULT, S.VERIFYING)):
        ledger.transition(RUN, task, before, after, cause={"test": True})
    cause = {
        "phase": "verify", "decided_by": "evidence", "disposition": disposition.value, "reasons": reasons, "head_sha": "b" * 40,
        "checks": [{"command": command, "exit_code": exit_code, "error": None}],
    }  # fmt: skip
    ledger.transition(RUN, task, S.VERIFYING, disposition, cause=cause)


def test_rejected_and_blocked_workers_carry_their_reasons(tmp_path: Path) -> None:
    with Ledger.open(tmp_path / "ledger.sqlite3") as ledger:
        ledger.create_run(RUN, controller_target="w1:p1", session="acme", repo="widgets")
        verified(ledger, "api", "pytest -q", 0, S.ACCEPTED, [])
        verified(ledger, "docs", "make docs", 1, S.REJECTED, [
            "check `make docs` failed on re-run (exit 1)",
            "worker reported `make docs` passing, but it does not pass on re-run",
        ])  # fmt: skip
        verified(ledger, "cli", "ls src/cli", 0, S.BLOCKED, ["edited outside its claim: README.md (integration paused for a decision)"])

        shown = render_report(build_report(ledger, RUN))

    assert shown == (
        "Herdr: PARTIAL\n"
        "Controller: acme/-/-/w1:p1\n"
        "Workers: api=accepted, docs=rejected, cli=blocked\n"
        f"Callbacks: run {RUN}; api 0 accepted; docs 0 accepted; cli 0 accepted; missing result: api, docs, cli\n"
        "Verification: api: `pytest -q` exit 0 -> accepted; "
        "docs: `make docs` exit 1 -> rejected (check `make docs` failed on re-run (exit 1); "
        "worker reported `make docs` passing, but it does not pass on re-run); "
        "cli: `ls src/cli` exit 0 -> blocked (edited outside its claim: README.md (integration paused for a decision))\n"
        "Retired: nothing created\n"
        "Blockers: cli blocked by verification: edited outside its claim: README.md (integration paused for a decision)\n"
    )
