"""The ledger's records: frozen dataclasses checked when built, with one-line errors, and no pydantic in `registry`."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest

from registry import EffectStatus, RegistryError, RunStatus, WorkerState
from registry.records import Effect, Event, InboxMessage, Run, Worker, as_dict, build, plain, replace

ROOT = Path(__file__).resolve().parents[2]
AT = datetime(2026, 12, 2, 7, 0, tzinfo=UTC)


def _run(**changes: object) -> dict[str, object]:
    return {
        "run_id": "w1:p1-20261202T070000Z", "controller_target": "w1:p1", "session": None, "organization": "o", "repo": "r",
        "repo_path": "/src/r", "base_ref": "main", "base_sha": None, "plan_path": None, "status": "active", "stopped_at": None,
        "verdict": None, "created_at": "2026-12-02T07:00:00.000000+00:00", "updated_at": AT, **changes,
    }  # fmt: skip


def test_a_record_is_built_from_stored_values_into_its_types() -> None:
    run = build(Run, _run(created_workspace_ids=["w2"], controller_kind="run"))
    assert (run.status, run.created_at, run.updated_at, run.created_workspace_ids) == (RunStatus.ACTIVE, AT, AT, ("w2",))
    assert run.status is RunStatus.ACTIVE and run.controller_kind == "run" and run.workspace_id is None
    paris = build(Run, _run(updated_at=datetime(2026, 12, 2, 8, 0, tzinfo=timezone(timedelta(hours=1)))))
    assert paris.updated_at == AT and paris.updated_at.tzinfo is UTC


def test_a_record_is_frozen_and_compares_by_value() -> None:
    run = build(Run, _run())
    with pytest.raises(dataclasses.FrozenInstanceError):
        run.status = RunStatus.FINISHED  # type: ignore[misc]
    assert run == build(Run, _run()) and run != build(Run, _run(repo="other"))


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"status": "paused"}, "invalid run: status: must be a RunStatus (active, interrupted, finished), not str"),
        ({"updated_at": datetime(2026, 12, 2)}, "invalid run: updated_at: must be timezone-aware, not datetime"),
        ({"created_at": "yesterday"}, "invalid run: created_at: must be an ISO timestamp, not str"),
        ({"created_workspace_ids": "w2"}, "invalid run: created_workspace_ids: must be tuple[str, ...], not str"),
        ({"created_workspace_ids": ["w2", 3]}, "invalid run: created_workspace_ids.1: must be str, not int"),
        ({"controller_kind": "robot"}, "invalid run: controller_kind: must be 'agent' or 'run', not str"),
        ({"colour": "red", "repo": 7}, "invalid run: colour: not a field; repo: must be str | None, not int"),
    ],
)
def test_a_bad_value_is_one_line_naming_each_field(changes: dict[str, object], message: str) -> None:
    with pytest.raises(RegistryError) as raised:
        build(Run, _run(**changes))
    assert str(raised.value) == message


def test_a_missing_field_is_named_and_a_defaulted_one_may_be_left_out() -> None:
    data = _run()
    del data["status"]
    with pytest.raises(RegistryError) as raised:
        build(Run, data)
    assert str(raised.value) == "invalid run: status: missing"
    assert build(Run, _run()).created_workspace_ids == ()


def test_replace_checks_the_changes_and_as_dict_gives_every_field() -> None:
    effect = build(
        Effect,
        {"id": 1, "run_id": "r", "task_label": None, "kind": "git_merge", "key": "k", "status": "intended", "request": {"a": 1},
         "response": None, "error": None, "intended_at": AT, "settled_at": None},
    )  # fmt: skip
    assert (effect.status, effect.is_new) == (EffectStatus.INTENDED, False)
    assert replace(effect, status="confirmed", response={"ok": True}).status is EffectStatus.CONFIRMED
    with pytest.raises(RegistryError) as raised:
        replace(effect, is_new="yes")
    assert str(raised.value) == "invalid effect: is_new: must be bool, not str"
    assert list(as_dict(effect)) == [field.name for field in dataclasses.fields(Effect)]


def test_plain_gives_a_change_as_the_journal_records_it() -> None:
    assert plain(("a", "b")) == ["a", "b"] and plain(WorkerState.READY) == "ready" and plain(None) is None and plain(3) == 3


def test_every_record_field_type_has_its_check() -> None:
    from registry.records import fields_of

    for record in (Run, Worker, Event, InboxMessage, Effect):
        assert set(fields_of(record)) == {field.name for field in dataclasses.fields(record)}


def test_the_ledger_imports_no_pydantic() -> None:
    """pydantic is for the edges (docs/ARCHITECTURE.md): opening the ledger and reading its records never loads it."""
    probe = "import sys, registry.store, registry.records; sys.exit('pydantic' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", probe], cwd=ROOT, timeout=60).returncode == 0


def test_the_fields_a_callback_sets_are_checked_with_the_worker_records_types() -> None:
    """`Rows` checks what a callback sets without building a record (a callback never imports records): same types."""
    import typing

    from registry.core import CALLBACK_FIELDS

    hints = typing.get_type_hints(Worker)
    assert {key: typing.get_args(hints[key])[0] for key in CALLBACK_FIELDS} == dict(CALLBACK_FIELDS)


@dataclasses.dataclass(frozen=True, kw_only=True)
class _Step:
    command: str
    seconds: float
    error: str | None = None


@dataclasses.dataclass(frozen=True, kw_only=True)
class _Stored:
    where: Path
    steps: tuple[_Step, ...]
    state: WorkerState


def test_any_plain_record_goes_to_json_and_back_checked() -> None:
    """The one codec of the engine's stored records: `plain` writes JSON's shape, `build` reads it back into the record."""
    record = _Stored(where=Path("/src/r"), steps=(_Step(command="make", seconds=1.5), _Step(command="true", seconds=2.0, error="x")), state=WorkerState.READY)
    data = plain(record)
    assert data == {"where": "/src/r", "steps": [{"command": "make", "seconds": 1.5, "error": None}, {"command": "true", "seconds": 2.0, "error": "x"}], "state": "ready"}
    assert build(_Stored, data) == record
    assert build(_Stored, {**data, "steps": [{"command": "make", "seconds": 2}]}).steps == (_Step(command="make", seconds=2.0),)
    with pytest.raises(RegistryError) as raised:
        build(_Stored, {"where": 3, "steps": [{"command": "make", "seconds": 1}, {"seconds": True, "colour": 1}], "state": "ready"})
    assert str(raised.value) == (
        "invalid _stored: where: must be a path, not int; steps.1.colour: not a field; steps.1.seconds: must be float, not bool; "
        "steps.1.command: missing"
    )
