"""1,000 valid callbacks from 8 processes at once, through the intake behind `orch inbox add`: each is recorded exactly once."""

from __future__ import annotations

from collections.abc import Callable
from multiprocessing.synchronize import Barrier
from pathlib import Path

from racing import race, reporting

from orchestrator.config import Settings
from orchestrator.engine import Engine
from orchestrator.intake import add_message
from registry import InboxVerdict, Ledger, WorkerState

S = WorkerState
RUN = "w1:p1-20261130T080000Z"
PROCESSES = 8
PER_PROCESS = 125  # 8 x 125 = 1,000 distinct callbacks
SHARED = 10  # callbacks every process sends (a resent callback): each must be accepted once, the copies kept aside
TASKS = ("task-a", "task-b", "task-c", "task-d")
WAIT_S = 120  # a barrier that is never reached fails the test instead of hanging it


def _callback(task: str, body: str) -> str:
    return f"[herdr-orchestration run={RUN} task={task} from={task} kind=update reply-to=w1:{task}]\n{body}"


def _settings(tmp_path: Path) -> Settings:
    return Settings(home=tmp_path, orch_home=tmp_path / "orch", policy_dir=tmp_path / "policies", src_root=tmp_path / "src")


def _sender(tmp_path: Path) -> Callable[[int, Barrier], tuple[list[str]]]:
    def body(index: int, barrier: Barrier) -> tuple[list[str]]:
        engine = Engine(settings=_settings(tmp_path), herdr=None, env={})  # type: ignore[arg-type]
        run = engine.ledger.get_run(RUN)
        barrier.wait(WAIT_S)
        verdicts = []
        for n in range(PER_PROCESS):
            if n < SHARED:
                verdicts.append(add_message(engine, run, _callback(TASKS[n % len(TASKS)], f"shared {n}")).verdict)
            task = TASKS[(index + n) % len(TASKS)]
            verdicts.append(add_message(engine, run, _callback(task, f"process {index} step {n}")).verdict)
        engine.close()
        return ([str(v) for v in verdicts],)

    return body


def test_1000_callbacks_from_8_processes_are_each_recorded_exactly_once(tmp_path: Path) -> None:
    with Ledger.open(tmp_path / "orch" / "ledger.sqlite3") as ledger:
        ledger.create_run(RUN, controller_target="w1:p1")
        for task in TASKS:
            ledger.add_worker(RUN, task, name=task, kind="codex", objective="o", pane_id=f"w1:{task}", reply_target=f"w1:{task}")
            for current, new in ((S.PROVISIONING, S.READY), (S.READY, S.DISPATCHED), (S.DISPATCHED, S.WORKING)):
                ledger.transition(RUN, task, current, new)
        setup_events = len(ledger.events(RUN))

    # Each process opens its own engine and ledger.
    race(reporting(_sender(tmp_path)), PROCESSES, WAIT_S * 2)

    with Ledger.open(tmp_path / "orch" / "ledger.sqlite3") as ledger:
        inbox = ledger.list_inbox(RUN)
        accepted = sorted(m.raw.split("\n", 1)[1] for m in inbox if m.verdict is InboxVerdict.ACCEPTED)
        distinct = [f"process {p} step {n}" for p in range(PROCESSES) for n in range(PER_PROCESS)]
        assert accepted == sorted([*distinct, *(f"shared {n}" for n in range(SHARED))])
        kept = sorted(m.raw.split("\n", 1)[1] for m in inbox if m.verdict is InboxVerdict.KEPT_ASIDE)
        assert kept == sorted(f"shared {n}" for n in range(SHARED) for _ in range(PROCESSES - 1))
        assert {m.reason_code for m in inbox if m.verdict is InboxVerdict.KEPT_ASIDE} == {"duplicate"}
        assert len(inbox) == PROCESSES * (PER_PROCESS + SHARED)
        events = ledger.events(RUN)
        assert [e.seq for e in events] == list(range(1, len(events) + 1))
        recorded = [e for e in events[setup_events:] if e.kind == "inbox_recorded"]
        assert sorted(e.detail["inbox_id"] for e in recorded) == sorted(m.id for m in inbox)
        # Only accepted callbacks are the workers' history; every worker still works, none was moved by an update.
        assert sum(1 for e in recorded if e.task_label is not None) == len(accepted)
        assert [ledger.get_worker(RUN, task).state for task in TASKS] == [S.WORKING] * len(TASKS)
