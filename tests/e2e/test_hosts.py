"""A plan naming another host, against two simulated herdr servers (each its own home, session, checkout and ids):
preflight checks the host through the controller's saved machine and ssh, refuses a plan that puts a worker there
whole, goes on when the host carries none, and names the host when it is unreachable (issue 26)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from fake_ssh import install

from herdr_sim import versions
from herdr_sim.testing import SimServer

pytestmark = pytest.mark.e2e

ORCH_BIN = Path(sys.executable).parent


@dataclass
class TwoHosts:
    """The controller's world (tests/e2e/conftest.py) and the build box: a second simulated herdr in session acme, a
    clone of the repository, reached as `me@buildbox` by ssh and as the saved machine `buildbox` by herdr."""

    world: Any
    box: SimServer
    box_checkout: Path
    network: Path
    root: Path

    def plan(self, *, remote_worker: bool) -> Path:
        return self.world.write_plan(f"""\
organization = "acme"
repo = "widgets"
base = "main"

[hosts.buildbox]
machine = "buildbox"
ssh = "me@buildbox"
checkout = "{self.box_checkout}"
orch = "{ORCH_BIN / 'orch'}"

[[workers]]
task = "api-pagination"
objective = "Add cursor pagination."
deliverable = "Commits."
branch = "feat/api-pagination"
claim = ["src/api/**"]
verify = ["true"]
{'host = "buildbox"' if remote_worker else ''}
""")

    def set_down(self, down: bool) -> None:
        data = json.loads(self.network.read_text())
        data["targets"]["me@buildbox"]["down"] = down
        self.network.write_text(json.dumps(data))

    def text(self, out: str) -> str:
        return out.replace(str(self.root), "<tmp>").replace(str(ORCH_BIN), "<venv>")


@pytest.fixture
def two_hosts(make_world: Callable[..., Any], tmp_path: Path) -> Iterator[TwoHosts]:
    if not versions.current().machine_status:
        pytest.skip("saved machines are simulated on the 0.9.5 profile only (herdr machine status is 0.9.2+)")
    world = make_world()
    box_root = tmp_path / "buildbox"
    checkout = box_root / "src" / "acme" / "widgets"
    subprocess.run(["git", "clone", "--quiet", str(world.repo.path), str(checkout)], check=True, timeout=60)
    home = Path(f"/tmp/orch-e2e-box-{abs(hash(str(tmp_path))) % 10**8}")  # socket paths must stay short
    box = SimServer(home, session="acme")
    box.__enter__()
    try:
        network = tmp_path / "network.json"
        env = {
            "PATH": f"{box.paths.bin}:{ORCH_BIN}:/usr/bin:/bin", "HOME": str(box_root), "HERDR_SIM_HOME": str(box.home),
            "HERDR_SOCKET_PATH": str(box.paths.socket_for("acme")), "HERDR_SESSION": "acme",
            "HERDR_SIM_VERSION": versions.current().name, "LANG": "C.UTF-8",
        }
        network.write_text(json.dumps({"targets": {"me@buildbox": {"home": str(box.home), "env": env, "cwd": str(box_root)}}}))
        install(tmp_path / "ssh-bin")
        world.env["HERDR_SIM_NETWORK"] = str(network)
        world.env["PATH"] = f"{tmp_path / 'ssh-bin'}:{world.env['PATH']}"
        saved = subprocess.run(["herdr", "machine", "add", "me@buildbox", "--label", "buildbox", "--remote-session", "acme"],
                               env=world.env, capture_output=True, text=True, timeout=60)
        assert saved.returncode == 0, saved.stderr
        yield TwoHosts(world=world, box=box, box_checkout=checkout, network=network, root=tmp_path)
    finally:
        box.__exit__(None, None, None)
        shutil.rmtree(home, ignore_errors=True)


def test_a_remote_worker_is_refused_whole_after_every_host_is_checked(two_hosts: TwoHosts, golden: Callable[[str, str], None]) -> None:
    world = two_hosts.world
    # The build box's herdr numbers its own ids from w1, as the controller's did: nothing tells them apart but the host.
    made = world.herdr("--machine", "buildbox", "workspace", "create", "--cwd", str(two_hosts.box_checkout), "--no-focus")["result"]
    assert (made["workspace"]["workspace_id"], world.env["HERDR_WORKSPACE_ID"]) == ("w1", "w1")

    result = world.orch("preflight", str(two_hosts.plan(remote_worker=True)))

    assert result.returncode == 1
    golden("preflight_hosts_refused.txt", two_hosts.text(result.stdout + result.stderr))
    assert not (world.orch_home / "runs").exists() or list((world.orch_home / "runs").iterdir()) == []
    assert [w["workspace_id"] for w in world.herdr("workspace", "list")["result"]["workspaces"]] == ["w1"]  # nothing created


def test_a_host_without_workers_is_checked_and_the_run_goes_on(two_hosts: TwoHosts) -> None:
    result = two_hosts.world.orch("preflight", str(two_hosts.plan(remote_worker=False)))

    assert result.returncode == 0, result.stdout + result.stderr
    hosts = [line for line in two_hosts.text(result.stdout).splitlines() if "hosts" in line or "note: buildbox" in line]
    assert hosts == [
        "ok   hosts           1 host ready, no worker placed on one",
        "                     note: buildbox: saved machine buildbox reachable, herdr 0.9.5 in session acme, integrations codex "
        "current (v8), codex installed, checkout <tmp>/buildbox/src/acme/widgets has the base, orch 0.1.0",
    ]


def test_an_unreachable_host_fails_closed_naming_it(two_hosts: TwoHosts) -> None:
    two_hosts.set_down(True)

    result = two_hosts.world.orch("preflight", str(two_hosts.plan(remote_worker=True)))

    assert (result.returncode, result.stdout.splitlines()[-1], result.stderr) == (
        1,
        "FAIL hosts           buildbox: saved machine buildbox unreachable: ssh: connect to host me@buildbox port 22: Connection refused",
        "orch: host buildbox: herdr cannot reach the saved machine \"buildbox\" (ssh: connect to host me@buildbox port 22: Connection refused)\n"
        "hint: `herdr machine reconnect buildbox` finishes its SSH sign-in in a terminal; then preflight again\n",
    )
