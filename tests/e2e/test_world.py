"""The e2e world itself: the controller runs inside a herdr pane (the simulator's, or in the live lane ORCH_HERDR's)."""

from __future__ import annotations

from typing import Any

import pytest


@pytest.mark.live_herdr
def test_controller_pane_is_current_and_orch_runs_in_it(world: Any) -> None:
    current = world.herdr("pane", "current", "--current")["result"]["pane"]

    assert (current["pane_id"], current["cwd"]) == (world.controller_pane, str(world.repo.path))
    assert world.orch("--version").stdout == "orch 0.1.0\n"
