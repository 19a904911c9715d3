"""The fact vocabulary: every kind has its detail record, none is a kind the ledger writes itself, and no phase spells one."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import get_type_hints

from registry.facts import DETAILS, FactKind
from registry.kinds import EventKind

ROOT = Path(__file__).resolve().parents[2]


def test_every_fact_kind_has_its_detail_record() -> None:
    assert sorted(DETAILS) == sorted(FactKind)
    for kind, record in DETAILS.items():
        assert get_type_hints(record), f"{kind}: {record.__name__} declares no fields"


def test_no_fact_kind_is_a_journal_kind_of_the_ledger() -> None:
    assert {k.value for k in FactKind} & {k.value for k in EventKind} == set()


def test_every_fact_kind_is_lowercase_words() -> None:
    assert [k.value for k in FactKind if not k.value.replace("_", "").isalpha() or not k.value.islower()] == []


def test_phases_name_fact_kinds_from_the_vocabulary_only() -> None:
    """A string literal as a fact's kind (record_fact's second argument, update_worker's fact=) is a second vocabulary."""
    found = []
    for path in sorted(ROOT.glob("orchestrator/**/*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute):
                continue
            kinds = []
            if node.func.attr in ("record_fact", "last_event") and len(node.args) >= 2:
                kinds.append(node.args[1])
            kinds += [k.value for k in node.keywords if k.arg == "fact"]
            if any(isinstance(k, ast.Constant) and isinstance(k.value, str) for k in kinds):
                found.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert found == []


def test_no_module_keeps_its_own_name_for_a_fact_kind() -> None:
    """`X = "<a fact kind>"` outside registry/facts.py is the comment-described vocabulary this module replaced."""
    values = {k.value for k in FactKind}
    found = []
    for path in sorted([*ROOT.glob("orchestrator/**/*.py"), *ROOT.glob("registry/*.py")]):
        if path.name == "facts.py":
            continue
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant) and node.value.value in values:
                found.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.value.value}")
    assert found == []


# `.detail` read in orchestrator/ that is no journal row's detail, each with why (source text of the expression).
NOT_A_JOURNAL_DETAIL = {
    ("orchestrator/dispatch.py", "w.detail"): "a dispatch result row's text (dispatch.WorkerDispatch.detail), rendered as a table cell",
    ("orchestrator/fleet.py", "sent.detail"): "the same dispatch result row's text, in a fleet step",
}


def test_no_phase_reads_a_journal_rows_detail_by_string_keys() -> None:
    """`event.detail.get("…")`, `event.detail["…"]` or `(event.detail or {}).get(…)` is a second, untyped reading of a
    fact or row: every read goes through `read_fact`/`read_facts` (facts) or `read_row`/`cause_of` (the ledger's rows)."""
    found = []
    for path in sorted(ROOT.glob("orchestrator/**/*.py")):
        name = str(path.relative_to(ROOT))
        tree = ast.parse(path.read_text())
        called = {id(node.func) for node in ast.walk(tree) if isinstance(node, ast.Call)}
        for node in ast.walk(tree):
            attribute = isinstance(node, ast.Attribute) and node.attr == "detail" and isinstance(node.ctx, ast.Load) and id(node) not in called
            if attribute and (name, ast.unparse(node)) not in NOT_A_JOURNAL_DETAIL:
                found.append(f"{name}:{node.lineno} {ast.unparse(node)}")
            # A value or parameter named `detail` read by key is the same reading, one step removed.
            read = node.value if isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load) else None
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get":
                read = node.func.value
            if isinstance(read, ast.Name) and read.id == "detail":
                found.append(f"{name}:{node.lineno} {ast.unparse(node)}")
    assert found == []
    # Each allowed read is still there (an entry that no longer matches goes from the list).
    sources = {str(p.relative_to(ROOT)): p.read_text() for p in ROOT.glob("orchestrator/**/*.py")}
    assert [key for key in NOT_A_JOURNAL_DETAIL if key[1] not in sources.get(key[0], "")] == []


def test_every_journal_kind_of_the_ledger_has_its_row_record_and_a_row_is_read_as_it() -> None:
    from registry.facts import ROWS, Change, EffectRow, cause_of, read_row

    kinds = [kind for record_kinds in ROWS.values() for kind in record_kinds]
    assert sorted(set(EventKind)) == sorted(k for k in kinds if k in set(EventKind)) and len(kinds) == len(set(kinds))
    assert sorted(k for k in kinds if k not in set(EventKind)) == sorted({FactKind.CALLBACK, FactKind.INTEGRATED})  # update_worker(fact=…)

    class Row:
        def __init__(self, kind: str, detail: dict[str, object]) -> None:
            self.kind, self.detail = kind, detail

    moved = Row(EventKind.TRANSITION, {"cause": {"phase": "verify", "reasons": ["r"]}, "changes": {"head_sha": "a"}})
    assert read_row(moved, Change) == {"cause": {"phase": "verify", "reasons": ["r"]}, "changes": {"head_sha": "a"}}
    assert read_row(Row(EventKind.WORKER_UPDATED, {}), Change) == {"cause": {}, "changes": {}}  # an older row: both there, empty
    assert (read_row(moved, EffectRow), read_row(None, Change), cause_of(moved), cause_of(Row(FactKind.BASE_MOVED, {"base": "m"}))) == (
        None, None, {"phase": "verify", "reasons": ["r"]}, None
    )


def test_a_fact_is_read_back_as_its_kinds_record_and_only_as_that() -> None:
    """One reader for every fact: the kind's record (the cause, for facts written with `update_worker(fact=…)`)."""
    import pytest

    from registry.errors import RegistryError
    from registry.facts import BaseMoved, CallbackCause, TabRenamed, read_fact, read_facts

    class Row:
        def __init__(self, kind: str, detail: dict[str, object]) -> None:
            self.kind, self.detail = kind, detail

    moved = {"base": "main", "pinned": "a" * 40, "now": None, "how": "deleted", "noticed_by": "docs"}
    rows = [Row(FactKind.BASE_MOVED, moved), Row(FactKind.TAB_RENAMED, {"tab": "w1:t2"}), Row(FactKind.BASE_MOVED, {"base": "dev"})]
    assert read_fact(rows[0], BaseMoved) == moved
    assert [fact.get("base") for fact in read_facts(rows, BaseMoved)] == ["main", "dev"]
    callback = Row(FactKind.CALLBACK, {"cause": {"inbox_id": 3, "kind": "update"}, "changes": {"last_callback_id": 3}})
    assert read_fact(callback, CallbackCause) == {"inbox_id": 3, "kind": "update"}
    with pytest.raises(RegistryError) as raised:
        read_fact(rows[1], BaseMoved)
    assert str(raised.value) == "journal row is a tab_renamed, not a base_moved fact"
    assert read_facts(rows, TabRenamed) == [{"tab": "w1:t2"}]


def test_each_detail_record_names_one_kind() -> None:
    """`read_fact(event, Record)` finds the kind by its record: no record may serve two kinds."""
    assert len(set(DETAILS.values())) == len(DETAILS)
