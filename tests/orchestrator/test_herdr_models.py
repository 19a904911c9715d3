"""The herdr wire models read CONTRACT.md-shaped samples, tolerate unknown fields, and the samples match herdr's schema."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import pydantic
import pytest

from orchestrator import herdr_models as m

DATA = Path(__file__).parent / "data" / "herdr"

ENVELOPE_SAMPLES = {
    "workspace_list.json": m.WorkspaceListResult,
    "workspace_create.json": m.WorkspaceCreated,
    "workspace_get.json": m.WorkspaceInfoResult,
    "workspace_close.json": m.OkResult,
    "tab_list.json": m.TabListResult,
    "tab_create.json": m.TabCreated,
    "tab_rename.json": m.TabInfoResult,
    "tab_close.json": m.OkResult,
    "pane_list.json": m.PaneListResult,
    "pane_get.json": m.PaneInfoResult,
    "pane_current.json": m.PaneCurrentResult,
    "pane_layout.json": m.PaneLayoutResult,
    "pane_split.json": m.PaneInfoResult,
    "pane_rename.json": m.PaneInfoResult,
    "pane_close.json": m.OkResult,
    "pane_move_new_tab.json": m.PaneMoved,
    "agent_list.json": m.AgentListResult,
    "agent_get.json": m.AgentInfoResult,
    "agent_wait.json": m.AgentInfoResult,
    "agent_rename.json": m.AgentInfoResult,
    "agent_focus.json": m.AgentInfoResult,
    "agent_start.json": m.AgentStarted,
    "agent_prompt.json": m.AgentPrompted,
    "agent_send_keys.json": m.OkResult,
    "worktree_list.json": m.WorktreeListResult,
    "worktree_create.json": m.WorktreeCreated,
    "worktree_open.json": m.WorktreeOpened,
    "worktree_remove.json": m.WorktreeRemoved,
}
ERROR_SAMPLES = ["error_agent_not_found.json", "error_confirmation_required.json", "error_agent_prompt_stalled.json"]


def _sample(name: str) -> str:
    return (DATA / name).read_text()


@pytest.mark.parametrize(("name", "model"), sorted(ENVELOPE_SAMPLES.items()))
def test_envelope_sample_parses_to_the_result_named_by_its_type(name: str, model: type[pydantic.BaseModel]) -> None:
    envelope = m.SuccessEnvelope.model_validate_json(_sample(name))
    assert type(envelope.result) is model


@pytest.mark.parametrize("name", sorted(ENVELOPE_SAMPLES))
def test_envelope_sample_validates_against_herdr_schema(name: str, shared_dir: Path) -> None:
    _validate(shared_dir, "success_response", json.loads(_sample(name)))


@pytest.mark.parametrize("name", ERROR_SAMPLES)
def test_error_sample_validates_against_herdr_schema_and_parses(name: str, shared_dir: Path) -> None:
    _validate(shared_dir, "error_response", json.loads(_sample(name)))
    assert m.ErrorEnvelope.model_validate_json(_sample(name)).error.code == name.removeprefix("error_").removesuffix(".json")


def _validate(shared_dir: Path, which: str, instance: Any) -> None:
    root = json.loads((shared_dir / "herdr-0.7.5" / "upstream" / "herdr-api.schema.json").read_text())
    # The schema's $refs are rooted at the whole document, so validate against it with a pointer into it.
    jsonschema.Draft202012Validator({**root, "$ref": f"#/schemas/{which}"}).validate(instance)


def test_agent_started_is_read_whole() -> None:
    started = m.SuccessEnvelope.model_validate_json(_sample("agent_start.json")).result
    assert started == m.AgentStarted(
        type="agent_started",
        agent=m.AgentInfo(
            terminal_id="term_6537a1b2c3d4e2",
            name="reviewer",
            agent="codex",
            agent_status="idle",
            workspace_id="w1",
            tab_id="w1:t1",
            pane_id="w1:p2",
            focused=False,
            interactive_ready=True,
            state_change_seq=3,
            cwd="/home/me/project",
            revision=2,
        ),
        argv=("codex", "-m", "gpt-5.4"),
    )


def test_pane_move_keeps_ids_and_optional_parts() -> None:
    moved = m.SuccessEnvelope.model_validate_json(_sample("pane_move_new_tab.json")).result
    assert isinstance(moved, m.PaneMoved)
    r = moved.move_result
    assert (r.changed, r.reason, r.previous_pane_id, r.pane.pane_id, r.pane.tab_id) == (True, None, "w3:p1", "w1:p4", "w1:t2")
    assert (r.created_tab and r.created_tab.label, r.closed_workspace_id, r.closed_tab_id, r.source_layout) == ("project-feat-x", "w3", None, None)


def test_unknown_fields_are_ignored_and_models_are_frozen() -> None:
    raw = json.loads(_sample("agent_get.json"))
    raw["result"]["agent"]["future_field"] = {"x": 1}
    raw["result"]["extra"] = True
    agent = m.SuccessEnvelope.model_validate(raw).result
    assert isinstance(agent, m.AgentInfoResult)
    with pytest.raises(pydantic.ValidationError):
        agent.agent.name = "other"  # type: ignore[misc]


def test_optional_flags_default_when_herdr_omits_them() -> None:
    shell_agent = m.AgentInfo.model_validate(
        {"terminal_id": "term_1", "agent_status": "unknown", "workspace_id": "w1", "tab_id": "w1:t1", "pane_id": "w1:p1", "focused": False, "revision": 0, "state_change_seq": 0}
    )
    assert (shell_agent.name, shell_agent.launch_pending, shell_agent.interactive_ready, shell_agent.screen_detection_skipped) == (None, False, False, False)


def test_unknown_result_type_is_rejected() -> None:
    with pytest.raises(pydantic.ValidationError):
        m.SuccessEnvelope.model_validate_json('{"id":"cli:x","result":{"type":"agent_stopped"}}')


def test_status_running_and_not_running() -> None:
    running = m.HerdrStatus.model_validate_json(_sample("status.json"))
    down = m.HerdrStatus.model_validate_json(_sample("status_not_running.json"))
    assert (running.server.running, running.server.protocol, running.server.compatible, running.client.version) == (True, 17, True, "0.7.5")
    assert down.server == m.ServerStatus(status="not_running", running=False, socket="/home/me/.config/herdr/herdr.sock", restart_needed=False)


def test_session_list_and_explain() -> None:
    sessions = m.SessionList.model_validate_json(_sample("session_list.json")).sessions
    assert [(s.name, s.default, s.running) for s in sessions] == [("default", True, True), ("acme", False, False)]
    explain = m.AgentExplain.model_validate_json(_sample("agent_explain.json"))
    assert (explain.agent, explain.state, explain.matched_rule, explain.fallback_reason) == (
        "codex",
        "idle",
        m.MatchedRule(id="idle_prompt", priority=10, region="bottom", state="idle"),
        None,
    )


def test_a_worktree_create_without_root_pane_parses_with_nowhere_to_start() -> None:
    # The composition contract: such a response means "there was nowhere to start it"; the engine never substitutes a pane.
    data = json.loads(_sample("worktree_create.json"))
    del data["result"]["root_pane"]

    created = m.SuccessEnvelope.model_validate(data).result

    assert isinstance(created, m.WorktreeCreated) and created.root_pane is None


def _with_extras(value: Any) -> Any:
    """The same document with a field no herdr has sent yet in every object, at every depth (explain's rule verdicts
    are kept as herdr's raw objects, so they are left as they are)."""
    if isinstance(value, dict):
        inner = {k: v if k == "evaluated_rules" else _with_extras(v) for k, v in value.items()}
        return {**inner, "completion_seq_v2": 1, "future_field": {"nested": [1, "x"]}}
    if isinstance(value, list):
        return [_with_extras(v) for v in value]
    return value


def _reached(model: pydantic.BaseModel, seen: set[type[pydantic.BaseModel]]) -> None:
    seen.add(type(model))
    for name in type(model).model_fields:
        value = getattr(model, name)
        for item in value if isinstance(value, tuple) else (value,):
            if isinstance(item, pydantic.BaseModel):
                _reached(item, seen)


# machine_status.json is the simulator's shape (herdr documents no `machine status --json` schema: herdr_sim/machines.py).
BARE_SAMPLES = {"status.json": m.HerdrStatus, "status_not_running.json": m.HerdrStatus, "session_list.json": m.SessionList,
                "agent_explain.json": m.AgentExplain, "machine_status.json": m.MachineStatusList, **{name: m.ErrorEnvelope for name in ERROR_SAMPLES}}


def test_095_row3_every_herdr_model_reads_a_document_with_extra_fields_as_without_them() -> None:
    """herdr adds optional fields freely (0.9.2's completion_seq and restore_error: ../herdr-0.9.5/DELTA.md row 3): every
    wire model, fed each sample with unknown fields added to every object, reads exactly what it reads without them."""
    seen: set[type[pydantic.BaseModel]] = set()
    for name, model in [*((n, m.SuccessEnvelope) for n in ENVELOPE_SAMPLES), *BARE_SAMPLES.items()]:
        raw = json.loads(_sample(name))
        plain, extra = model.model_validate(raw), model.model_validate(_with_extras(raw))
        assert extra == plain, name
        _reached(plain, seen)
    built = {m.IntegrationEntry, m.HerdrVersion, m.HerdrFeatures}  # orch builds these itself, from text lines
    wire = {cls for cls in vars(m).values() if isinstance(cls, type) and issubclass(cls, m.Wire) and cls is not m.Wire}
    assert sorted(c.__name__ for c in wire - seen - built) == []


def test_095_rows1_2_completion_seq_and_restore_error_are_read_when_herdr_sends_them() -> None:
    agent = json.loads(_sample("agent_get.json"))
    pane = json.loads(_sample("pane_get.json"))
    assert (m.SuccessEnvelope.model_validate(agent).result.agent.completion_seq, m.SuccessEnvelope.model_validate(pane).result.pane.restore_error) == (None, None)  # type: ignore[union-attr]
    agent["result"]["agent"]["completion_seq"] = 4
    pane["result"]["pane"]["restore_error"] = "resume command exited with status 1"
    assert (m.SuccessEnvelope.model_validate(agent).result.agent.completion_seq, m.SuccessEnvelope.model_validate(pane).result.pane.restore_error) == (  # type: ignore[union-attr]
        4, "resume command exited with status 1")
