"""Two real processes write one ledger at once (facts, inbox, transitions, CAS and intend races); nothing is lost or doubled."""

from __future__ import annotations

import multiprocessing
import traceback
from multiprocessing.synchronize import Barrier
from pathlib import Path
from typing import Any

from registry import InboxVerdict, Ledger, StaleState, WorkerState

S = WorkerState
RUN_ID = "w1:p1-20261130T080000Z"
ROUNDS = 40
PROCESSES = 2
WAIT_S = 60  # a barrier that is never reached fails the test instead of hanging it


def _writer(path: Path, index: int, barrier: Barrier, results: Any) -> None:
    try:
        ledger = Ledger.open(path)
        won, lost, owned = [], [], []
        barrier.wait(WAIT_S)
        for i in range(ROUNDS):
            ledger.record_fact(RUN_ID, "tick", detail={"process": index, "round": i})
            ledger.record_inbound(RUN_ID, f"own {index}/{i}", source=f"p{index}", verdict=InboxVerdict.ACCEPTED, fingerprint=f"own-{index}-{i}")
            # Both processes receive the same callback: exactly one copy may be accepted.
            ledger.record_inbound(RUN_ID, f"same {i}", source=f"p{index}", verdict=InboxVerdict.ACCEPTED, fingerprint=f"shared-{i}")
            ledger.transition(RUN_ID, f"own-{index}", S.WORKING, S.BLOCKED, cause={"round": i})
            ledger.transition(RUN_ID, f"own-{index}", S.BLOCKED, S.WORKING, cause={"round": i})
            barrier.wait(WAIT_S)  # line both processes up on the same worker
            try:
                ledger.transition(RUN_ID, f"race-{i}", S.READY, S.DISPATCHED, cause={"process": index})
                won.append(i)
            except StaleState as stale:
                assert stale.actual == "dispatched", stale
                lost.append(i)
            # Both resume the same step: exactly one may own the prompt.
            if ledger.intend(RUN_ID, f"race-{i}", "agent_prompt", f"race-{i}:dispatch:1", {"round": i}).is_new:
                owned.append(i)
        ledger.close()
        results.put((index, won, lost, owned, None))
    except BaseException:
        results.put((index, [], [], [], traceback.format_exc()))


def test_two_processes_share_one_ledger_without_losing_anything(tmp_path: Path) -> None:
    path = tmp_path / "ledger.sqlite3"
    with Ledger.open(path) as ledger:
        ledger.create_run(RUN_ID, controller_target="w1:p1")
        for index in range(PROCESSES):
            ledger.add_worker(RUN_ID, f"own-{index}", name=f"own-{index}", kind="codex", objective="o")
            for current, new in ((S.PROVISIONING, S.READY), (S.READY, S.DISPATCHED), (S.DISPATCHED, S.WORKING)):
                ledger.transition(RUN_ID, f"own-{index}", current, new)
        for i in range(ROUNDS):
            ledger.add_worker(RUN_ID, f"race-{i}", name=f"race-{i}", kind="codex", objective="o")
            ledger.transition(RUN_ID, f"race-{i}", S.PROVISIONING, S.READY)
        setup_events = len(ledger.events(RUN_ID))

    # fork: the target need not be importable; no connection is open across the fork (SQLite forbids that).
    context = multiprocessing.get_context("fork")
    barrier = context.Barrier(PROCESSES)
    results = context.Queue()
    workers = [context.Process(target=_writer, args=(path, index, barrier, results)) for index in range(PROCESSES)]
    for process in workers:
        process.start()
    outcomes = sorted(results.get(timeout=WAIT_S * 2) for _ in workers)
    for process in workers:
        process.join(WAIT_S)
    assert [(index, error) for index, *_, error in outcomes] == [(0, None), (1, None)]
    assert [process.exitcode for process in workers] == [0, 0]

    won = [set(w) for _, w, _, _, _ in outcomes]
    lost = [set(lo) for _, _, lo, _, _ in outcomes]
    owned = [set(o) for _, _, _, o, _ in outcomes]
    assert won[0] | won[1] == set(range(ROUNDS)) and won[0] & won[1] == set()
    assert owned[0] | owned[1] == set(range(ROUNDS)) and owned[0] & owned[1] == set()
    assert lost == [set(range(ROUNDS)) - won[0], set(range(ROUNDS)) - won[1]]

    with Ledger.open(path) as ledger:
        events = ledger.events(RUN_ID)
        assert [e.seq for e in events] == list(range(1, len(events) + 1))
        new = events[setup_events:]
        ticks = sorted((e.detail["process"], e.detail["round"]) for e in new if e.kind == "tick")
        assert ticks == [(p, i) for p in range(PROCESSES) for i in range(ROUNDS)]

        inbox = ledger.list_inbox(RUN_ID)
        accepted = sorted(m.fingerprint for m in inbox if m.verdict is InboxVerdict.ACCEPTED)
        assert accepted == sorted([f"own-{p}-{i}" for p in range(PROCESSES) for i in range(ROUNDS)] + [f"shared-{i}" for i in range(ROUNDS)])
        duplicates = sorted(m.fingerprint for m in inbox if m.reason_code == "duplicate")
        assert duplicates == sorted(f"shared-{i}" for i in range(ROUNDS))
        assert len([e for e in new if e.kind == "inbox_recorded"]) == len(inbox) == 2 * PROCESSES * ROUNDS

        for index in range(PROCESSES):
            assert ledger.get_worker(RUN_ID, f"own-{index}").state is S.WORKING
            moves = [(e.from_state, e.to_state) for e in new if e.task_label == f"own-{index}"]
            assert moves == [(S.WORKING, S.BLOCKED), (S.BLOCKED, S.WORKING)] * ROUNDS

        for i in range(ROUNDS):
            assert ledger.get_worker(RUN_ID, f"race-{i}").state is S.DISPATCHED
            winners = [e.detail["cause"]["process"] for e in new if e.task_label == f"race-{i}" and e.kind == "transition"]
            assert winners == [0 if i in won[0] else 1]
            assert [e.detail["request"] for e in new if e.task_label == f"race-{i}" and e.kind == "effect_intended"] == [{"round": i}]
        assert len(ledger.in_flight(RUN_ID)) == ROUNDS

        assert len(new) == PROCESSES * ROUNDS * 5 + 2 * ROUNDS
