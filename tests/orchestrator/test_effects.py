"""The effect table: every kind orch makes has a read-back, and every read-back the table names exists."""

from __future__ import annotations

import ast
import dataclasses
import importlib
import json
from pathlib import Path

import pytest

from orchestrator.effects import EFFECTS, from_json, settler, to_json
from orchestrator.herdr_models import AgentPrompted
from registry import RegistryError

SOURCES = Path(__file__).resolve().parents[2] / "orchestrator"


def _kinds_made() -> set[str]:
    """Every effect kind a phase passes to `engine.once` (or provision's `rnd.once`, which prefixes the task)."""
    found = set()
    for path in SOURCES.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "once":
                index = 1 if isinstance(node.func.value, ast.Name) and node.func.value.id == "rnd" else 2
                if len(node.args) > index and isinstance(node.args[index], ast.Constant) and isinstance(node.args[index].value, str):
                    found.add(node.args[index].value)
    return found


def test_every_kind_a_phase_makes_is_in_the_table_and_every_table_kind_is_made() -> None:
    assert _kinds_made() == set(EFFECTS)


def _result_models() -> set[tuple[str, str]]:
    """(module, class name) of every result a phase passes to `engine.once` (``model=``) or provision's `rnd.once`."""
    found = set()
    for path in SOURCES.rglob("*.py"):
        module = "orchestrator." + ".".join(path.relative_to(SOURCES).with_suffix("").parts)
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "once":
                rnd = isinstance(node.func.value, ast.Name) and node.func.value.id == "rnd"
                named = [k.value for k in node.keywords if k.arg == "model"] + (node.args[5:6] if rnd else [])
                found.update((module, each.id) for each in named if isinstance(each, ast.Name) and each.id != "model")
    return found


def test_every_effect_result_is_a_frozen_record_of_orchs_own_or_one_of_herdrs_response_models() -> None:
    from orchestrator.herdr_models import Wire

    models = {f"{module}:{name}": getattr(importlib.import_module(module), name) for module, name in _result_models()}
    assert {"orchestrator.provision:Checkout", "orchestrator.dispatch:PromptOutcome", "orchestrator.messages:AgentPrompted"} <= models.keys()
    odd = [name for name, model in models.items()
           if not (dataclasses.is_dataclass(model) and model.__dataclass_params__.frozen) and not issubclass(model, Wire)]  # type: ignore[attr-defined]  # fmt: skip
    assert odd == []
    # and the ledger's codec can read each record back (a field type it cannot check would fail only at a replay)
    from registry.records import fields_of

    for model in models.values():
        if dataclasses.is_dataclass(model):
            assert fields_of(model)


def test_every_kind_names_a_settle_function_that_exists() -> None:
    for kind, spec in EFFECTS.items():
        assert spec.settle.startswith("orchestrator."), kind
        assert callable(settler(kind)), kind
        assert settler(kind).__doc__, f"{spec.settle} says in one line what read-back proves"


# --- an effect's stored response <-> its result (orchestrator.effects.to_json / from_json) ---

# Responses exactly as orch wrote them into the ledger before its effect results were plain records (pydantic's
# `model_dump(mode="json")`, stored as JSON text): each must read back as the same result, and be written again byte
# for byte, so a run recorded by an earlier orch resumes unchanged. A row from before a field existed reads back with
# the field's default.
STORED_TODAY = [
    ("orchestrator.agents:KeysSent", '{"target": "w1:p2", "key": "shift+tab"}'),
    ("orchestrator.dialogs:DialogKeys", '{"pane_id": "w1:p2", "dialog": "trust", "keys": ["Enter"]}'),
    ("orchestrator.dispatch:PromptOutcome",
     '{"submitted": "yes", "accepted": true, "status": "working", "state_change_seq": 4, "completion_seq": null, "error_code": null, '
     '"error": null, "via": "agent get"}'),
    ("orchestrator.dispatch:PromptOutcome",
     '{"submitted": "unknown", "accepted": false, "status": null, "state_change_seq": null, "completion_seq": 2, '
     '"error_code": "agent_prompt_stalled", "error": "no state change", "via": null}'),
    ("orchestrator.provision:Checkout", '{"path": "/src/w.worktrees/a", "branch": "feat/a", "workspace_id": "w2", "root_pane_id": "w2:p1", "already_open": false}'),
    ("orchestrator.provision:Moved", '{"pane_id": "w1:p3", "tab_id": "w1:t2", "workspace_id": "w1", "closed_workspace_id": null}'),
    ("orchestrator.provision:Closed", '{"workspace_id": "w2"}'),
    ("orchestrator.provision:Renamed", '{"tab_id": "w1:t2", "label": "feature-a"}'),
    ("orchestrator.provision:Split", '{"pane_id": "w1:p4", "tab_id": "w1:t2", "workspace_id": "w1", "direction": "right"}'),
    ("orchestrator.provision:Started", '{"name": "feature-a", "pane_id": "w1:p3", "agent_status": "idle", "interactive_ready": true, "reused": false}'),
    ("orchestrator.provision:SetupRun",
     '{"runs": [{"command": "make deps", "exit_code": 0, "seconds": 1.5, "output_tail": "ok", "error": null}, '
     '{"command": "make gen", "exit_code": null, "seconds": 600.0, "output_tail": "", "error": "timed out"}], "failed": "make gen"}'),
    ("orchestrator.provision:BaseSent", '{"sha": "' + "c" * 40 + '", "ref": "refs/orch/base/feature-b"}'),
    ("orchestrator.retire:Sent", '{"pane_id": "w1:p3"}'),
    ("orchestrator.retire:Closed", '{"pane_id": "w1:p3"}'),
    ("orchestrator.retire:Removed", '{"path": "/src/w.worktrees/a", "via": "herdr", "workspace_id": "w2"}'),
    ("orchestrator.retire:Removed", '{"path": "/src/w.worktrees/a", "via": "git", "workspace_id": null}'),
    ("orchestrator.doctor:ProbeStarted", '{"name": "doctor-claude", "pane_id": "w3:p1", "agent_status": "blocked"}'),
    ("orchestrator.doctor:Sent", '{"pane_id": "w3:p1"}'),
    ("orchestrator.doctor:Closed", '{"workspace_id": "w3"}'),
    ("orchestrator.integrate:WorktreeReady", '{"path": "/orch/runs/r/integration", "branch": "orch/integration"}'),
    ("orchestrator.integrate:MergeDone", '{"head_sha": "' + "a" * 40 + '", "integrated_sha": "' + "b" * 40 + '"}'),
]
STORED_BEFORE_A_FIELD = [
    ("orchestrator.dispatch:PromptOutcome", '{"submitted": "yes", "accepted": false, "status": "idle", "state_change_seq": 3}',
     {"completion_seq": None, "error_code": None, "error": None, "via": None}),
    ("orchestrator.provision:Split", '{"pane_id": "w1:p4", "tab_id": "w1:t2", "workspace_id": "w1"}', {"direction": None}),
    ("orchestrator.provision:Checkout", '{"path": "/p", "branch": null, "workspace_id": null, "root_pane_id": null}', {"already_open": False}),
]


def _model(name: str) -> type:
    module, _, attr = name.partition(":")
    found: type = getattr(importlib.import_module(module), attr)
    return found


@pytest.mark.parametrize(("name", "stored"), STORED_TODAY, ids=[name.partition(":")[2] for name, _ in STORED_TODAY])
def test_a_response_stored_by_an_earlier_orch_reads_back_as_its_record_and_is_stored_again_byte_for_byte(name: str, stored: str) -> None:
    model = _model(name)
    result = from_json(model, json.loads(stored))
    assert dataclasses.is_dataclass(result) and type(result) is model
    assert json.dumps(to_json(result)) == stored
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(result, next(iter(json.loads(stored))), "changed")


@pytest.mark.parametrize(("name", "stored", "defaults"), STORED_BEFORE_A_FIELD)
def test_a_response_stored_before_a_field_existed_reads_back_with_its_default(name: str, stored: str, defaults: dict[str, object]) -> None:
    assert to_json(from_json(_model(name), json.loads(stored))) == {**json.loads(stored), **defaults}


def test_a_herdr_response_model_is_stored_as_its_json_and_validated_when_read_back() -> None:
    stored = {"type": "agent_prompted", "agent": {
        "terminal_id": "term_2", "agent_status": "working", "workspace_id": "w1", "tab_id": "w1:t2", "pane_id": "w1:p2",
        "focused": False, "revision": 3, "state_change_seq": 7, "name": "feature-a", "agent": "claude"}}  # fmt: skip
    prompted = from_json(AgentPrompted, stored)
    assert isinstance(prompted, AgentPrompted) and prompted.agent.state_change_seq == 7
    assert to_json(prompted) == prompted.model_dump(mode="json")
    assert from_json(AgentPrompted, to_json(prompted)) == prompted


def test_a_stored_response_that_does_not_fit_its_record_is_one_line_naming_each_field() -> None:
    with pytest.raises(RegistryError) as raised:
        from_json(_model("orchestrator.dialogs:DialogKeys"), {"pane_id": 2, "keys": "Enter", "colour": "red"})
    assert str(raised.value) == "invalid dialogkeys: colour: not a field; pane_id: must be str, not int; keys: must be tuple[str, ...], not str; dialog: missing"
    with pytest.raises(RegistryError) as raised:
        from_json(AgentPrompted, {"type": "agent_prompted", "agent": {"agent_status": "working"}})
    assert str(raised.value) == "invalid agentprompted: agent.terminal_id: Field required (+6 more)"
