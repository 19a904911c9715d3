"""The e2e world itself: the controller runs inside a simulated herdr pane and `herdr` is the simulator."""

from __future__ import annotations

from typing import Any


def test_controller_pane_is_current_and_herdr_is_the_simulator(world: Any) -> None:
    current = world.herdr("pane", "current", "--current")["result"]["pane"]

    assert (current["pane_id"], current["cwd"]) == (world.controller_pane, str(world.repo.path))
    assert world.orch("--version").stdout == "orch 0.1.0\n"
