"""A herdr call lost with orch alive (the client killed before or after herdr acted) is settled in the same run."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from orchestrator.provision import provision
from registry import EffectStatus, WorkerState
from provision_world import THREE, prepare_run

CREATES = ("worktree create", "pane move", "pane split", "agent start")


def made(log: Path) -> Counter[str]:
    """How many times herdr itself ran each creating command (its own call log: a call whose caller died is in it)."""
    found: Counter[str] = Counter()
    for line in log.read_text().splitlines() if log.exists() else []:
        call = json.loads(line)
        words = call["argv"][1:]
        if words[:1] == ["--session"]:
            words = words[2:]
        if " ".join(words[:2]) in CREATES and (call.get("rc") == 0 or call.get("died") == "after"):
            found[" ".join(words[:2])] += 1
    return found


@pytest.mark.parametrize("when", ["before", "after"])
@pytest.mark.parametrize("command", CREATES)
def test_a_lost_provisioning_call_is_settled_by_read_back_and_every_worker_becomes_ready(make_world: Any, tmp_path: Path, command: str, when: str) -> None:
    world = make_world()
    log = tmp_path / "herdr-calls.log"
    world.env["HERDR_SIM_CALL_LOG"] = str(log)
    engine, run = prepare_run(world, THREE.format(base="main"))
    world.sim.add_fault(command, die=when)

    result = provision(engine, run)

    assert [w.error for w in result.workers if w.error] == []
    assert [(w.task, w.state) for w in result.workers if not w.error] == [("api-pagination", "ready"), ("api-tests", "ready"), ("pagination-docs", "ready")]
    effects = engine.ledger.list_effects(run.run_id)
    assert [e.key for e in effects if e.status is EffectStatus.INTENDED] == []
    lost = [e for e in engine.ledger.events(run.run_id) if e.kind == "effect_unknown"]
    assert [e.detail["error"] for e in lost] == ["HerdrCallLost"]
    # Nothing made twice: herdr ran each create exactly as often as a run without the fault does.
    assert made(log) == Counter({"worktree create": 2, "pane move": 2, "pane split": 1, "agent start": 3})
    states = {w.task_label: w for w in engine.ledger.list_workers(run.run_id)}
    assert {t: w.state for t, w in states.items()} == dict.fromkeys(states, WorkerState.READY)
    agents = {a["name"]: a["pane_id"] for a in world.herdr("agent", "list")["result"]["agents"]}
    assert agents == {t: w.pane_id for t, w in states.items()}
