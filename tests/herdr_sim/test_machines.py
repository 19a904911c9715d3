"""Saved machines in the simulator: `herdr --machine` reaches another simulated server through the simulated network,
ids collide across servers as real herdr's do, and an unreachable machine is reported, never served locally."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from herdr_sim.machines import NETWORK_ENV
from herdr_sim.testing import SimServer

pytestmark = pytest.mark.any_version


def test_a_saved_machine_forwards_to_its_own_server_with_colliding_ids(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HERDR_SIM_VERSION", "0.9.5")
    network = tmp_path / "network.json"
    monkeypatch.setenv(NETWORK_ENV, str(network))
    box = tmp_path / "box"
    box.mkdir()
    with SimServer(tmp_path / "here") as here, SimServer(tmp_path / "there", session="acme") as there:
        network.write_text(json.dumps({"targets": {"me@box": {"home": str(there.home)}}}))
        unsaved = here.run(["--machine", "box", "workspace", "list"])
        added = here.run(["machine", "add", "me@box", "--label", "box", "--remote-session", "acme"])
        listed = here.run(["machine", "list", "--json"])

        local = json.loads(here.run(["workspace", "create", "--cwd", str(tmp_path), "--no-focus"]).stdout)["result"]
        remote = json.loads(here.run(["--machine", "box", "workspace", "create", "--cwd", str(box), "--no-focus"]).stdout)["result"]
        status = here.run(["machine", "status", "box", "--json"])
        server = json.loads(here.run(["--machine", "m1", "status", "server", "--json"]).stdout)
        remote_list = json.loads(there.run(["workspace", "list"]).stdout)["result"]["workspaces"]
        local_list = json.loads(here.run(["workspace", "list"]).stdout)["result"]["workspaces"]

        network.write_text(json.dumps({"targets": {"me@box": {"home": str(there.home), "down": True}}}))
        down = here.run(["machine", "status", "--json"])
        refused = here.run(["--machine", "box", "workspace", "list"])
        not_forwarded = here.run(["--machine", "box", "integration", "status"])

    assert (unsaved.returncode, unsaved.stderr) == (2, "error: unknown machine 'box'; use `herdr machine list`\n")
    assert (added.returncode, added.stdout) == (0, "saved machine box (m1)\n")
    assert json.loads(listed.stdout) == {"machines": [{"id": "m1", "label": "box", "ssh_target": "me@box", "remote_session": "acme", "enabled": True}]}
    # Every server numbers from w1: the ids say nothing about which server made them.
    assert (local["workspace"]["workspace_id"], remote["workspace"]["workspace_id"]) == ("w1", "w1")
    assert [w["workspace_id"] for w in remote_list] == ["w1"] and [w["workspace_id"] for w in local_list] == ["w1"]
    assert remote_list[0]["label"] == "box" and local_list[0]["label"] != "box"
    assert json.loads(status.stdout)["machines"][0] | {} == {
        "id": "m1", "label": "box", "ssh_target": "me@box", "remote_session": "acme", "enabled": True, "reachable": True, "error": None,
    }
    assert (server["running"], server["session"]) == (True, "acme")
    assert json.loads(down.stdout)["machines"][0]["error"] == "ssh: connect to host me@box port 22: Connection refused"
    assert (refused.returncode, refused.stdout, refused.stderr) == (
        1, "", "error: machine 'box' (session acme): ssh: connect to host me@box port 22: Connection refused\n",
    )
    assert (not_forwarded.returncode, not_forwarded.stderr) == (
        2, "error: `integration status` is not an API-backed machine command; --machine does not run local management commands or attach a TUI\n",
    )


def test_a_command_listed_n_times_in_down_at_takes_the_target_down_at_its_nth_arrival(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from herdr_sim.machines import _goes_down_at

    network = tmp_path / "network.json"
    monkeypatch.setenv(NETWORK_ENV, str(network))
    network.write_text(json.dumps({"targets": {"me@box": {"home": "/nowhere", "down_at": ["agent list", "agent list"]}}}))

    seen = []
    for args in (["agent", "list"], ["agent", "get", "w1:p1"], ["agent", "list"], ["agent", "list"]):
        _goes_down_at("me@box", args)
        entry = json.loads(network.read_text())["targets"]["me@box"]
        seen.append((entry["down_at"], entry.get("down", False)))

    assert seen == [(["agent list"], False), (["agent list"], False), ([], True), ([], True)]
