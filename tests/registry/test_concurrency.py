"""Two real processes write one ledger at once (facts, inbox, transitions, CAS and intend races, one spool entry); nothing is lost or doubled."""

from __future__ import annotations

from collections.abc import Callable
from multiprocessing.synchronize import Barrier
from pathlib import Path

from racing import race, reporting

from registry import InboxVerdict, Ledger, StaleState, WorkerState

S = WorkerState
RUN_ID = "w1:p1-20261130T080000Z"
ROUNDS = 40
PROCESSES = 2
WAIT_S = 60  # a barrier that is never reached fails the test instead of hanging it


def _writer(path: Path) -> Callable[[int, Barrier], tuple[list[int], list[int], list[int]]]:
    def body(index: int, barrier: Barrier) -> tuple[list[int], list[int], list[int]]:
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
        return won, lost, owned

    return body


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

    outcomes = race(reporting(_writer(path)), PROCESSES, WAIT_S)
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



def test_two_collectors_racing_on_one_spool_entry_record_it_once(tmp_path: Path) -> None:
    # The ledger itself, not the run's driver lock, keeps a spooled message (source spool:<host>:<id>) recorded once.
    path = tmp_path / "ledger.sqlite3"
    with Ledger.open(path) as ledger:
        ledger.create_run(RUN_ID, controller_target="w1:p1")
        setup_events = len(ledger.events(RUN_ID))

    def collector(index: int, barrier: Barrier) -> tuple[list[int]]:
        first = []
        with Ledger.open(path) as ledger:
            for i in range(ROUNDS):
                barrier.wait(WAIT_S)  # both collectors listed and judged the same spool entry: now both record it
                row = ledger.rows.record_inbound(
                    RUN_ID, f"entry {i}", source=f"spool:box:{i:020d}-1-deadbeef", verdict=InboxVerdict.ACCEPTED, fingerprint=f"entry-{i}"
                )
                if not row["already_recorded"]:
                    first.append(i)
        return (first,)

    first = [set(f) for _, f, _ in race(reporting(collector), PROCESSES, WAIT_S)]
    assert first[0] | first[1] == set(range(ROUNDS)) and first[0] & first[1] == set()
    with Ledger.open(path) as ledger:
        assert sorted((m.source, m.verdict) for m in ledger.list_inbox(RUN_ID)) == [
            (f"spool:box:{i:020d}-1-deadbeef", InboxVerdict.ACCEPTED) for i in range(ROUNDS)
        ]
        assert len([e for e in ledger.events(RUN_ID)[setup_events:] if e.kind == "inbox_recorded"]) == ROUNDS
