"""Every pair of worker states, legal and illegal, against the documented table (docs/ledger.md)."""

from __future__ import annotations

import itertools

import pytest

from registry import IllegalTransition, WorkerState, check_transition, is_legal
from registry.machine import LIVE_STATES, TRANSITIONS, disposition_after

S = WorkerState

# The table of docs/ledger.md, written out independently of registry/machine.py.
EXPECTED_TABLE = """
queued: provisioning skipped retiring
provisioning: ready failed retiring
ready: provisioning dispatched failed retiring
dispatched: working question blocked result failed superseded
working: question blocked result failed superseded
question: working blocked result failed superseded
blocked: dispatched working result verifying failed superseded retiring retained
result: dispatched verifying failed superseded
verifying: accepted rejected superseded blocked failed
accepted: retiring retained
rejected: dispatched retiring retained
superseded: retiring retained
failed: retiring retained
retiring: retired retained
retained: retiring
retired:
skipped: retiring
"""


def _expected() -> dict[WorkerState, set[WorkerState]]:
    table: dict[WorkerState, set[WorkerState]] = {}
    for line in EXPECTED_TABLE.strip().splitlines():
        source, _, targets = line.partition(":")
        table[S(source)] = {S(target) for target in targets.split()}
    return table


EXPECTED = _expected()
ALL_PAIRS = list(itertools.product(WorkerState, WorkerState))


def test_the_table_covers_every_state_exactly_once() -> None:
    assert set(TRANSITIONS) == set(WorkerState)
    assert set(EXPECTED) == set(WorkerState)


@pytest.mark.parametrize(("current", "new"), ALL_PAIRS, ids=[f"{a}->{b}" for a, b in ALL_PAIRS])
def test_every_pair_is_legal_exactly_when_the_table_says(current: WorkerState, new: WorkerState) -> None:
    legal = new in EXPECTED[current]
    assert is_legal(current, new) is legal
    if legal:
        check_transition(current, new)
    else:
        with pytest.raises(IllegalTransition) as raised:
            check_transition(current, new)
        assert (raised.value.current, raised.value.new) == (current.value, new.value)


def test_no_state_moves_to_itself() -> None:
    assert [state for state in WorkerState if is_legal(state, state)] == []


def test_every_state_is_reachable_from_queued_and_can_reach_retired() -> None:
    reached, frontier = {S.QUEUED}, [S.QUEUED]
    while frontier:
        for target in TRANSITIONS[frontier.pop()]:
            if target not in reached:
                reached.add(target)
                frontier.append(target)
    assert reached == set(WorkerState)
    can_retire = {S.RETIRED}
    while True:
        more = {s for s in WorkerState if TRANSITIONS[s] & can_retire} - can_retire
        if not more:
            break
        can_retire |= more
    assert can_retire == set(WorkerState)


def test_every_live_state_can_fail_on_evidence() -> None:
    assert sorted(s for s in LIVE_STATES if not is_legal(s, S.FAILED)) == []


def test_illegal_transition_message_lists_what_is_allowed() -> None:
    with pytest.raises(IllegalTransition) as raised:
        check_transition(S.READY, S.ACCEPTED)
    assert str(raised.value) == "illegal worker transition ready -> accepted; from ready only: provisioning, dispatched, failed, retiring"


def test_terminal_state_message_says_so() -> None:
    with pytest.raises(IllegalTransition) as raised:
        check_transition(S.RETIRED, S.RETIRING)
    assert str(raised.value) == "illegal worker transition retired -> retiring; from retired only: nothing (terminal state)"


@pytest.mark.parametrize(
    ("current", "new", "previous", "after"),
    [
        (S.VERIFYING, S.ACCEPTED, None, S.ACCEPTED),
        (S.VERIFYING, S.REJECTED, None, S.REJECTED),
        (S.VERIFYING, S.BLOCKED, None, S.BLOCKED),
        (S.WORKING, S.BLOCKED, None, None),
        (S.WORKING, S.FAILED, None, S.FAILED),
        (S.WORKING, S.SUPERSEDED, None, S.SUPERSEDED),
        (S.REJECTED, S.DISPATCHED, S.REJECTED, None),
        (S.BLOCKED, S.WORKING, S.BLOCKED, None),
        (S.BLOCKED, S.RETIRING, S.BLOCKED, S.BLOCKED),
        (S.ACCEPTED, S.RETIRING, S.ACCEPTED, S.ACCEPTED),
        (S.RETIRING, S.RETIRED, S.ACCEPTED, S.ACCEPTED),
        (S.PROVISIONING, S.READY, None, None),
    ],
)
def test_disposition_follows_verdicts_and_clears_when_work_reopens(
    current: WorkerState, new: WorkerState, previous: WorkerState | None, after: WorkerState | None
) -> None:
    assert disposition_after(current, new, previous) == after


def test_each_state_says_which_message_kinds_it_takes_in_the_contracts_vocabulary() -> None:
    from packets import envelope
    from registry.kinds import WORKER_KINDS
    from registry.machine import ACCEPTS, REOPENED_BY_PROMPT, WORKER_MESSAGE_KINDS, accepted_kinds

    # One definition: the Message Contract parses the very kinds the machine judges.
    assert envelope.WORKER_KINDS is WORKER_KINDS
    assert frozenset(WORKER_KINDS) == WORKER_MESSAGE_KINDS == {"update", "question", "blocked", "result"}
    assert set(ACCEPTS) == set(WorkerState)
    moves = {"question": WorkerState.QUESTION, "blocked": WorkerState.BLOCKED, "result": WorkerState.RESULT}
    for state, kinds in ACCEPTS.items():
        assert kinds <= WORKER_MESSAGE_KINDS
        # A kind a state takes either moves the worker where the transition table allows, or only records.
        for kind in kinds & moves.keys():
            assert moves[kind] == state or is_legal(state, moves[kind]), (state, kind)
    taking = {state for state, kinds in ACCEPTS.items() if kinds}
    assert taking == {WorkerState.DISPATCHED, WorkerState.WORKING, WorkerState.QUESTION, WorkerState.BLOCKED, WorkerState.RESULT}
    assert "question" not in ACCEPTS[WorkerState.QUESTION]  # one open question at a time
    assert accepted_kinds(WorkerState.RESULT, prompted=True) == WORKER_MESSAGE_KINDS
    assert accepted_kinds(WorkerState.ACCEPTED, prompted=True) == frozenset()
    assert WorkerState.VERIFYING not in REOPENED_BY_PROMPT


def test_every_state_is_in_exactly_one_stage() -> None:
    """A state added to the machine fails here until it is placed in a stage (and so in the groups built from stages)."""
    from registry.machine import STAGES

    placed = [state for stage in STAGES.values() for state in stage]
    assert sorted(placed) == sorted(WorkerState)


# The groups, written out independently: a change to one is a decision about every phase that asks it.
EXPECTED_GROUPS = {
    "OPEN": "dispatched working question blocked",
    "AT_WORK": "dispatched working",
    "WAITING_ON_PERSON": "question blocked",
    "UNVERIFIED": "result verifying",
    "MOVING": "dispatched working result verifying",
    "LIVE_STATES": "provisioning ready dispatched working question blocked result verifying",
    "NEEDS_PANE": "provisioning ready dispatched working question blocked",
    "NOT_DISPATCHED": "queued provisioning ready skipped",
    "NOT_ADMITTED": "queued skipped",
    "NO_AGENT": "queued retired skipped",
    "SETTLED": "accepted rejected superseded failed",
    "UNACCEPTED": "rejected superseded failed",
    "FREEABLE": "accepted rejected superseded failed retained",
    "FINISHED": "accepted retired retained",
    "RETIREMENT": "retiring retired retained",
    "LADDER_DONE": "retired retained",
    "RETIRABLE": "blocked accepted rejected superseded failed retiring retained skipped",
    "RESOLVING": "dispatched working result verifying accepted rejected superseded failed",
    "INITIAL": "queued provisioning",
    "DISPOSITIONS": "blocked accepted rejected superseded failed",
    "REOPENING": "dispatched working question result verifying",
    "SUPERSEDABLE": "dispatched working question blocked result verifying",
    "ABANDON_TO_SUPERSEDED": "dispatched working question result verifying",
}


@pytest.mark.parametrize("name", sorted(EXPECTED_GROUPS))
def test_each_named_group_holds_what_its_phases_expect(name: str) -> None:
    import registry.machine

    group = getattr(registry.machine, name)
    assert isinstance(group, frozenset)
    assert sorted(group) == sorted(WorkerState(s) for s in EXPECTED_GROUPS[name].split())


def test_no_module_spells_out_a_set_of_worker_states() -> None:
    """Groups live in registry/machine.py only: a tuple, list or set of two or more states elsewhere is a second vocabulary."""
    import ast
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    names = {"S", "WorkerState"}
    found = []
    for path in sorted([*root.glob("orchestrator/**/*.py"), *root.glob("registry/*.py"), *root.glob("packets/*.py")]):
        if path.name == "machine.py" and path.parent.name == "registry":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Tuple | ast.List | ast.Set):
                members = [e for e in node.elts if isinstance(e, ast.Attribute) and isinstance(e.value, ast.Name) and e.value.id in names]
                if len(members) >= 2:
                    found.append(f"{path.relative_to(root)}:{node.lineno}")
    assert found == []
