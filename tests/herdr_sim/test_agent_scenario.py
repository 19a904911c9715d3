"""Scenario validation without pydantic on the common path: the plain check accepts only what pydantic gives the same for."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest

from herdr_sim.agent import scenario
from herdr_sim.agent.scenario import STEPS, Behaviour, Crash, Invalid, Send, Write

PROJECT = Path(__file__).resolve().parents[2]
DEMO = PROJECT / "orchestrator" / "demo_data" / "scenarios.toml"

# One valid table per step kind, every field given (aliases by their keys); and the values tried in every field.
FULL: dict[str, dict[str, Any]] = {
    "update": {"message": "m"},
    "write": {"path": "p", "content": "c", "append": True},
    "commit": {"message": "m"},
    "run": {"command": "true"},
    "verify": {},
    "question": {"message": "q"},
    "blocked": {"message": "b"},
    "stall": {},
    "ignore": {},
    "crash": {"exit_code": 3, "message": "boom"},
    "send": {"kind": "update", "message": "m", "run": "r", "task": "t", "from": "x", "reply-to": "y"},
    "approval": {"command": "rm -rf build"},
    "result": {"status": "done", "checks": "claimed", "residual_risk": "r", "report": True, "changed_files": ["a"], "commits": []},
}
VALUES: tuple[Any, ...] = (
    "s", "", "7", "true", "run", "claimed", "update", 0, 1, 7, 255, 256, -1, True, False, 1.0, 2.5, [], ["a"], ["a", 1], [["a"]],
    {}, {"a": 1}, None,
)  # fmt: skip


def _pydantic_steps(raw: Any) -> list[Any] | str:
    adapter, _ = scenario._models()
    try:
        return [scenario._as_plain(scenario._TAGS[step.do], step) for step in scenario._judged(lambda: adapter.validate_python(raw))]
    except Invalid as exc:
        return str(exc)


def _pydantic_behaviour(raw: Any) -> Any:
    _, model = scenario._models()
    try:
        return scenario._as_plain(Behaviour, scenario._judged(lambda: model.model_validate(raw)))
    except Invalid as exc:
        return str(exc)


def _step_corpus() -> list[Any]:
    corpus: list[Any] = [[], {}, "x", [1], [None], [{"do": 1}], [{"do": "dance"}], [{}], [{"kind": "update"}]]
    for tag, full in FULL.items():
        corpus.append([{"do": tag, **full}])
        required = {key: value for key, value in full.items() if key in ("message", "path", "command", "kind") and tag != "commit"}
        corpus.append([{"do": tag, **required}])
        for key in full:
            corpus.append([{"do": tag, **{k: v for k, v in full.items() if k != key}}])  # one field left out
            corpus.extend([{"do": tag, **full, key: value}] for value in VALUES)  # one field of every other type
        corpus.append([{"do": tag, **full, "extra": 1}])
        corpus.append([{"do": tag, **full}, {"do": "verify", "x": 1}])  # a bad second step
    corpus.append([{"do": "send", "kind": "k", "message": "m", "sender": "x"}])  # the attribute name is not a key
    corpus.append([{"do": "send", "kind": "k", "message": "m", "reply_to": "x"}])
    return corpus


@pytest.mark.parametrize("raw", _step_corpus(), ids=lambda raw: repr(raw)[:60])
def test_the_plain_check_accepts_only_what_pydantic_accepts_and_builds_the_same_steps(raw: Any) -> None:
    plain = scenario._plain_steps(raw)
    judged = _pydantic_steps(raw)
    if plain is not None:
        assert plain == judged
    # Whatever the plain check passes on, the loader answers with pydantic's verdict, word for word.
    try:
        assert scenario.validate_steps(raw) == judged
    except Invalid as exc:
        assert str(exc) == judged


def test_every_well_formed_table_takes_the_plain_path() -> None:
    bare = [[{"do": tag}] for tag in ("verify", "stall", "ignore", "commit", "crash", "result")]  # every field defaulted
    for raw in [*([{"do": tag, **full}] for tag, full in FULL.items()), *bare]:
        assert scenario._plain_steps(raw) == _pydantic_steps(raw) != []
    data = tomllib.loads(DEMO.read_text())
    for label, raw in data["task"].items():
        assert scenario._plain_steps(raw) is not None, label
    assert Send(do="send", kind="k", message="m", sender="x") == scenario._plain_steps([{"do": "send", "kind": "k", "message": "m", "from": "x"}])[0]  # type: ignore[index]


@pytest.mark.parametrize(
    "raw",
    [{}, {"trust_dialog": True, "hooks": False, "first_start_delay_ms": 1500, "paste_collapse": True}, {"first_start_delay_ms": -1},
     {"first_start_delay_ms": True}, {"first_start_delay_ms": "5"}, {"hooks": 1}, {"hooks": "yes"}, {"hook": True}, [], 1, "x",
     {"trust_dialog": True, "trust_focus_decline": True, "title_spinner": True, "idle_while_working": True}],
    ids=repr,
)  # fmt: skip
def test_behaviour_tables_agree_with_pydantic(raw: Any) -> None:
    plain = scenario._plain(Behaviour, raw)
    judged = _pydantic_behaviour(raw)
    if plain is not None:
        assert plain == judged
    try:
        assert scenario.validate_behaviour(raw) == judged
    except Invalid as exc:
        assert str(exc) == judged


def test_the_models_pydantic_judges_by_are_the_dataclasses_fields() -> None:
    # Through validation (how pydantic lays its schema out is its own business): the required fields, then the defaults.
    tags = {cls: tag for tag, cls in scenario._TAGS.items()}
    for cls in (*STEPS, Behaviour):
        defaults = {f.name: f.default for f in dataclasses.fields(cls) if f.default is not dataclasses.MISSING}
        if cls is Behaviour:
            assert _pydantic_behaviour({}) == Behaviour(**defaults)
        else:
            tag = tags[cls]
            required = {key: FULL[tag][key] for key, name, _kind, default, _meta in scenario._fields(cls) if default is dataclasses.MISSING and key != "do"}
            assert _pydantic_steps([{"do": tag, **required}]) == [cls(do=tag, **required, **defaults)]
    assert _pydantic_steps([{"do": "crash", "exit_code": 0}]) == "0.crash.exit_code: Input should be greater than or equal to 1"
    assert _pydantic_steps([{"do": "write", "path": "a", "mode": "x"}]) == "0.write.mode: Extra inputs are not permitted"
    assert Crash(do="crash").exit_code == 1 and Write(do="write", path="a").content == "{answer}\n"


def test_an_agent_starts_reads_its_packet_and_its_steps_without_pydantic(tmp_path: Path) -> None:
    probe = (
        "import sys\n"
        "from herdr_sim.agent import main\n"  # what the agent executable imports
        "from herdr_sim.agent.packet import parse_packet\n"
        "from herdr_sim.agent.scenario import load_behaviour, load_steps\n"
        "env = {'HERDR_SIM_SCENARIOS': sys.argv[1]}\n"
        "load_behaviour(env, 'codex')\n"
        "assert [s.do for s in load_steps(env, 'task', 'greeting')][-1] == 'result'\n"
        "load_steps(env, 'follow-up', 'greeting'); load_steps(env, 'task', 'unscripted')\n"
        "print(sorted(m for m in ('pydantic', 'pydantic_core') if m in sys.modules))\n"
    )
    scenarios = tmp_path / "scenarios.toml"
    scenarios.write_text(DEMO.read_text() + "\n[agents.codex]\ntrust_dialog = true\nfirst_start_delay_ms = 10\n")
    done = subprocess.run([sys.executable, "-c", probe, str(scenarios)], capture_output=True, text=True, timeout=60, env=dict(os.environ))
    assert (done.stdout, done.stderr) == ("[]\n", "")
