"""`orch demo --hosts`'s plan: the demo's own plan with one worker moved to the build box, and a valid plan."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

from orchestrator.config import Settings
from orchestrator.demo import BOX, BOX_TARGET, Stage, demo_data
from orchestrator.engine import orch_executable
from orchestrator.plan import load_plan


def test_the_two_host_plan_is_the_demo_plan_with_one_worker_on_the_build_box(tmp_path: Path) -> None:
    stage = Stage(tmp_path / "stage", "acme", hosts=True)
    path = tmp_path / "plan.toml"
    path.write_text(stage.plan_text())

    two: dict[str, Any] = tomllib.loads(path.read_text())
    one: dict[str, Any] = tomllib.loads(demo_data("plan.toml"))
    box = tmp_path / "stage" / "buildbox"
    assert two.pop("hosts") == {BOX: {"machine": BOX, "ssh": BOX_TARGET, "checkout": str(box / "src" / "acme" / "widgets"),
                                      "orch": orch_executable(), "orch_home": str(box / "orch-home")}}
    assert [w.pop("host", None) for w in two["workers"]] == [None, None, BOX]
    assert two == one  # nothing else differs: both demos run the same work
    resolved = load_plan(path, Settings.from_env({"HOME": str(tmp_path)}))
    assert [(w.task, w.host) for w in resolved.plan.workers] == [("greeting", None), ("area-tests", None), ("usage-docs", BOX)]
