"""What the callback benchmarks share: the `orch` beside this python, and a ledger with one dispatched worker."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

from orchestrator.intake import LIMITS_FILE
from orchestrator.locations import run_dir
from packets.envelope import DEFAULT_MESSAGE_LIMIT
from registry import Ledger, WorkerState

RUN = "w1:p1-20261201T000000Z"


def orch_executable() -> str:
    """The `orch` installed beside this python (the benchmarks time the real console script)."""
    beside = Path(sys.executable).parent / "orch"
    found = str(beside) if beside.exists() else shutil.which("orch")
    if not found:
        raise SystemExit("bench: `orch` is not installed beside this python (pip install -e .)")
    return found


def seed_dispatched_worker(home: Path) -> None:
    """A run whose worker feature-a was dispatched and may call back (reply target w1:pa)."""
    with Ledger.open(home / "ledger.sqlite3") as ledger:
        ledger.create_run(RUN, controller_target="w1:p1")
        ledger.add_worker(RUN, "feature-a", name="feature-a", kind="codex", objective="x", pane_id="w1:pa", reply_target="w1:pa")
        ledger.transition(RUN, "feature-a", WorkerState.PROVISIONING, WorkerState.READY)
        ledger.transition(RUN, "feature-a", WorkerState.READY, WorkerState.DISPATCHED)
    # What preflight saves beside the plan snapshot: the run's message limit (callbacks read it, not the plan).
    folder = run_dir(home, RUN)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / LIMITS_FILE).write_text(json.dumps({"message_limit_bytes": DEFAULT_MESSAGE_LIMIT}) + "\n", encoding="utf-8")
