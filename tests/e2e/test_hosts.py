"""A plan naming another host, against two simulated herdr servers (each its own home, session, checkout and ids):
preflight checks the host through the controller's saved machine and ssh; a plan with a worker on each host ends PASS,
integrated on the controller, each provisioned, dispatched and retired on its own host with ids colliding across the
two; a link dropped after a remote `worktree create` is settled by read-back; a host gone at retire keeps its checkout;
an unreachable host fails closed at preflight, named; `after` across hosts starts each dependant from the integration
commit holding its predecessor's work; a host lost while its worker works gets the held workers' bound (issue 26)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from herdr_sim import versions
from herdr_sim.ssh import install
from herdr_sim.testing import SimServer, eventually

pytestmark = pytest.mark.e2e

ORCH_BIN = Path(sys.executable).parent
# The box goes down at its Nth `agent list`: dispatch's acceptance and the first check-ins list it before.
LISTS_BEFORE_DOWN = 8


@dataclass
class TwoHosts:
    """The controller's world (tests/e2e/conftest.py) and the build box: a second simulated herdr in session acme, a
    clone of the repository, reached as `me@buildbox` by ssh and as the saved machine `buildbox` by herdr."""

    world: Any
    box: SimServer
    box_checkout: Path
    network: Path
    root: Path

    def plan(self, *, remote_worker: bool, local_worker: bool = False, integration: bool = False) -> Path:
        second = """
[[workers]]
task = "ui-theme"
objective = "Theme the UI."
deliverable = "Commits."
branch = "feat/ui-theme"
claim = ["src/ui/**"]
verify = ["true"]
setup = ['git config orch.setup-ran "$(pwd)"']
host = "buildbox"
"""
        if local_worker:  # api-pagination runs on the controller, ui-theme on the build box
            remote_worker = False
        return self.world.write_plan(f"""\
organization = "acme"
repo = "widgets"
base = "main"

[hosts.buildbox]
machine = "buildbox"
ssh = "me@buildbox"
checkout = "{self.box_checkout}"
orch = "{ORCH_BIN / 'orch'}"
orch_home = "{self.root / 'buildbox' / 'orch-home'}"
{'[integration]' if integration else ''}
{'enabled = true' if integration else ''}
{'branch = "chore/integration"' if integration else ''}

[[workers]]
task = "api-pagination"
objective = "Add cursor pagination."
deliverable = "Commits."
branch = "feat/api-pagination"
claim = ["src/api/**"]
verify = ["true"]
{'host = "buildbox"' if remote_worker else ''}
{second if local_worker else ''}""")

    def drop_after(self, command: str) -> None:
        data = json.loads(self.network.read_text())
        data["targets"]["me@buildbox"]["drop_after"] = [command]
        self.network.write_text(json.dumps(data))

    def set_down(self, down: bool) -> None:
        data = json.loads(self.network.read_text())
        data["targets"]["me@buildbox"]["down"] = down
        self.network.write_text(json.dumps(data))

    def text(self, out: str) -> str:
        return out.replace(str(self.root), "<tmp>").replace(str(ORCH_BIN), "<venv>")


def box_herdr(hosts: TwoHosts, *argv: str) -> Any:
    """One herdr command on the build box's own server (as a client there)."""
    done = hosts.box.run(list(argv))
    return json.loads(done.stdout) if done.stdout.startswith("{") else done.stdout


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


def test_a_plan_with_a_worker_on_each_of_two_hosts_ends_pass_integrated_and_retired_each_on_its_own_host(two_hosts: TwoHosts) -> None:
    world = two_hosts.world
    plan = two_hosts.plan(remote_worker=True, local_worker=True, integration=True)
    # A bystander on the controller: a workspace of the person's with one plain shell, whose ids the build box's
    # herdr is about to hand out again for the remote worker (every server numbers its own from w1).
    bystander = world.herdr("workspace", "create", "--cwd", str(two_hosts.root), "--no-focus")["result"]["root_pane"]

    preflight = world.orch("preflight", str(plan))
    assert preflight.returncode == 0, preflight.stdout + preflight.stderr
    assert "ok   hosts           1 host ready: ui-theme on buildbox" in preflight.stdout
    run_id = json.loads(world.orch("status", "--json").stdout)["run_id"]
    provision = world.orch("provision", "--run", run_id)
    assert provision.returncode == 0, provision.stdout + provision.stderr
    rows = {w.task_label: w for w in world.engine().ledger.list_workers(run_id)}
    remote, local = rows["ui-theme"], rows["api-pagination"]
    # The remote worker's workspace and pane carry the very ids of the controller's bystander: only the host tells
    # them apart, and retire must close the one on the build box.
    assert (remote.host, remote.pane_id, remote.created_workspace_ids) == ("buildbox", bystander["pane_id"], (bystander["workspace_id"],))
    assert (local.host, local.pane_id, local.created_workspace_ids) == ("local", "w1:p2", ("w3",))
    remote_path = str(two_hosts.box_checkout.parent / "widgets.worktrees" / "widgets-feat-ui-theme")
    on_box = box_herdr(two_hosts, "worktree", "list", "--cwd", str(two_hosts.box_checkout), "--json")["result"]["worktrees"]
    assert [w["path"] for w in on_box if w.get("branch") == "feat/ui-theme"] == [remote_path]
    assert [a["name"] for a in box_herdr(two_hosts, "agent", "list")["result"]["agents"]] == ["ui-theme"]
    # Its setup ran there, in its fresh checkout, before its agent started.
    ran = subprocess.run(["git", "-C", remote_path, "config", "orch.setup-ran"], capture_output=True, text=True, check=True).stdout.strip()
    assert ran == remote_path

    dispatch = world.orch("dispatch", "--run", run_id)
    assert dispatch.returncode == 0, dispatch.stdout + dispatch.stderr
    # Each agent took its packet on its own host and called back: the local one into the controller's inbox, the
    # remote one into its host's spool, which the controller's check-ins (`orch wait`) collect; then both are
    # verified at home (the remote worker's commit fetched by SHA) and accepted.
    def states() -> dict[str, str]:
        world.orch("wait", "--run", run_id, "--timeout", "10", "--json", timeout=120)
        return {w["task"]: w["state"] for w in json.loads(world.orch("status", "--run", run_id, "--json").stdout)["workers"]}

    eventually(lambda: states() == {"api-pagination": "accepted", "ui-theme": "accepted"}, lambda: f"both accepted: {states()}", timeout_s=240)
    commits = subprocess.run(["git", "-C", remote_path, "log", "--format=%s", "-1"], capture_output=True, text=True, check=True).stdout
    assert commits.startswith("ui-theme:")

    finish = world.orch("finish", "--run", run_id)
    assert finish.returncode == 0, finish.stdout + finish.stderr  # PASS
    # Both workers' commits are merged on the controller; the remote one arrived by SHA, nothing was pushed.
    merged = subprocess.run(["git", "-C", str(world.repo.path), "log", "--format=%s", "chore/integration"], capture_output=True, text=True, check=True).stdout
    assert sorted(line.split(":")[0] for line in merged.splitlines() if line.startswith(("ui-theme:", "api-pagination:"))) == ["api-pagination", "ui-theme"]
    # The remote worker's pane and workspace were closed on the build box; the controller's bystander of the same ids
    # is untouched, and so is the controller's own pane.
    assert world.herdr("pane", "get", bystander["pane_id"])["result"]["pane"]["workspace_id"] == bystander["workspace_id"]
    assert world.herdr("pane", "get", world.controller_pane)["result"]["pane"]["pane_id"] == world.controller_pane
    # The box's primary-checkout workspace, which herdr opened with the first worktree orch made there, went too.
    assert box_herdr(two_hosts, "workspace", "list")["result"]["workspaces"] == []
    assert box_herdr(two_hosts, "agent", "list")["result"]["agents"] == []
    assert not Path(remote_path).exists() and not Path(str(local.worktree_path)).exists()
    # The run made `<checkout>.worktrees/` on each host; emptied, it went on each (the box's over ssh).
    assert (Path(remote_path).parent.exists(), Path(str(local.worktree_path)).parent.exists()) == (False, False)
    retired = {w["task"]: w["state"] for w in json.loads(world.orch("status", "--run", run_id, "--json").stdout)["workers"]}
    assert retired == {"api-pagination": "retired", "ui-theme": "retired"}, finish.stdout
    # The report names each retired id with its host when it is not the controller's.
    report = json.loads(world.orch("report", "--run", run_id, "--json").stdout)
    items = {(r["task"], r["what"], r["id"], r.get("host"), r["status"]) for r in report["retired"] if r["task"] == "ui-theme"}
    assert items == {("ui-theme", "pane", bystander["pane_id"], "buildbox", "closed"), ("ui-theme", "worktree", remote_path, "buildbox", "closed"),
                     ("ui-theme", "workspace", bystander["workspace_id"], "buildbox", "closed"), ("ui-theme", "workspace", "w1", "buildbox", "closed")}
    assert all("host" not in r for r in report["retired"] if r["task"] != "ui-theme")


@pytest.mark.parametrize("lost", ["link", "seam"])
def test_a_remote_worktree_create_whose_answer_is_lost_is_settled_by_read_back_without_a_second_create(two_hosts: TwoHosts, lost: str) -> None:
    """``link``: the ssh hop drops after the build box ran the create. ``seam``: the crash matrix's seam kills the
    `herdr --machine buildbox worktree create` process after it ran (orch alive: the unknown-outcome matrix)."""
    world = two_hosts.world
    assert world.orch("preflight", str(two_hosts.plan(remote_worker=True))).returncode == 0
    run_id = json.loads(world.orch("status", "--json").stdout)["run_id"]
    if lost == "link":
        two_hosts.drop_after("worktree create")
    else:
        world.env["ORCH_TEST_CRASH_AT"] = "1:after:LOSE:worktree create"

    provision = world.orch("provision", "--run", run_id)
    world.env.pop("ORCH_TEST_CRASH_AT", None)

    assert provision.returncode == 0, provision.stdout + provision.stderr
    engine = world.engine()
    creates = [e for e in engine.ledger.list_effects(run_id) if e.kind == "worktree_create"]
    assert [(e.key, e.status, e.request["host"]) for e in creates] == [("api-pagination:worktree_create", "confirmed", "buildbox")]
    facts = [(e.kind, e.detail.get("answer")) for e in engine.ledger.events(run_id, task_label="api-pagination") if e.kind in ("effect_unknown", "effect_settled")]
    assert facts == [("effect_unknown", None), ("effect_settled", "done")]
    listed = box_herdr(two_hosts, "worktree", "list", "--cwd", str(two_hosts.box_checkout), "--json")["result"]["worktrees"]
    assert [w["branch"] for w in listed if w.get("branch", "").startswith("feat/")] == ["feat/api-pagination"]
    assert engine.ledger.get_worker(run_id, "api-pagination").state == "ready"

    # The build box goes away: retire keeps what is there, says so, and removes nothing blind.
    two_hosts.set_down(True)
    gone = world.orch("retire", "--run", run_id, "--abandon", "api-pagination", "--reason", "the test is over")
    worker = world.engine().ledger.get_worker(run_id, "api-pagination")
    remote_path = str(worker.worktree_path)
    assert (gone.returncode, worker.state, Path(remote_path).is_dir()) == (0, "retained", True), gone.stdout + gone.stderr
    assert "host buildbox is unreachable" in gone.stdout
    # Back again: the next retire finishes the ladder there.
    two_hosts.set_down(False)
    back = world.orch("retire", "--run", run_id)
    assert back.returncode == 0, back.stdout + back.stderr
    assert (world.engine().ledger.get_worker(run_id, "api-pagination").state, Path(remote_path).exists()) == ("retired", False), back.stdout
    assert not Path(remote_path).parent.exists()  # the box's `<checkout>.worktrees/`, emptied, went with it


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


# core on the controller; ui-theme after it on the build box; docs after that on the controller. Each writes into its
# claim what it finds in the checkout it starts from (core: its own text): the file is there only if its worktree
# started from the integration branch's commit holding its predecessor's merged work.
CHAIN = (("core", "src/core", "", "echo from core > src/core/core.txt"),
         ("ui-theme", "src/ui", "buildbox", "cp src/core/core.txt src/ui/seen-core.txt"),
         ("docs", "docs", "", "cp src/ui/seen-core.txt docs/seen-ui.txt"))


def after_plan(hosts: TwoHosts) -> str:
    """The chain's plan: integration on, each worker after the one before it, the middle one on the build box."""
    head = (f'organization = "acme"\nrepo = "widgets"\nbase = "main"\n\n[defaults]\ncheckin_interval_s = 1\n\n'
            f'[integration]\nenabled = true\nbranch = "chore/integration"\n\n[hosts.buildbox]\nmachine = "buildbox"\n'
            f'ssh = "me@buildbox"\ncheckout = "{hosts.box_checkout}"\norch = "{ORCH_BIN / "orch"}"\n'
            f'orch_home = "{hosts.root / "buildbox" / "orch-home"}"\n')
    workers = [
        f'\n[[workers]]\ntask = "{task}"\nobjective = "Write {folder}."\ndeliverable = "{folder}/ committed."\nbranch = "feat/{task}"\n'
        f'claim = ["{folder}/"]\nverify = ["test -f {command.split()[-1]}"]\n' + (f'host = "{host}"\n' if host else "")
        + (f'after = ["{CHAIN[i - 1][0]}"]\n' if i else "")
        for i, (task, folder, host, command) in enumerate(CHAIN)
    ]
    return head + "".join(workers)


def after_scenarios() -> str:
    """Each worker runs its command, commits, verifies and sends its result."""
    return "".join(
        f'\n[[task.{task}]]\ndo = "{do}"\n' + (f'command = "mkdir -p {folder} && {command}"\n' if do == "run" else "")
        for task, folder, _host, command in CHAIN for do in ("run", "commit", "verify", "result")
    )


def test_after_across_hosts_each_dependant_starts_from_the_integration_commit_holding_its_predecessors_work(two_hosts: TwoHosts) -> None:
    """core on the controller, ui-theme after it on the build box, docs after that on the controller: the build box's
    worker starts from the integration branch's commit, sent into orch's ref of its checkout; the controller's
    dependant starts from the commit that merged the remote work, fetched home by SHA."""
    world = two_hosts.world
    world.write_scenarios(after_scenarios())
    (two_hosts.box.home / "scenarios.toml").write_text(after_scenarios())
    plan = world.write_plan(after_plan(two_hosts))

    done = world.orch("run", str(plan), "--json", timeout=600)

    assert done.returncode == 0, done.stdout + done.stderr
    outcome = json.loads(done.stdout)
    assert (outcome["finished"], outcome["report"]["verdict"]) == (True, "PASS"), outcome["report"]["verdict_reasons"]
    engine = world.engine()
    run_id = outcome["run_id"]
    workers = {w.task_label: w for w in engine.ledger.list_workers(run_id)}
    # Each dependant's start is the integration commit that merged its predecessor, wherever either ran.
    assert workers["ui-theme"].base_sha == workers["core"].integrated_sha
    assert workers["docs"].base_sha == workers["ui-theme"].integrated_sha
    # On the build box, exactly that commit under orch's own ref, the worker's branch made from it and no other branch
    # moved; the worker's checkout held core's file when it started (it copied it), and docs then held the remote work.
    ref = f"refs/orch/{engine.run_dir(run_id).name}/base/ui-theme"
    box = two_hosts.box_checkout
    assert subprocess.run(["git", "-C", str(box), "rev-parse", ref], capture_output=True, text=True, check=True).stdout.strip() == workers["core"].integrated_sha
    branches = subprocess.run(["git", "-C", str(box), "for-each-ref", "--format=%(refname)", "refs/heads"], capture_output=True, text=True, check=True).stdout.split()
    assert branches == ["refs/heads/feat/ui-theme", "refs/heads/main"]
    assert subprocess.run(["git", "-C", str(box), "merge-base", "--is-ancestor", workers["core"].integrated_sha, "feat/ui-theme"]).returncode == 0
    assert subprocess.run(["git", "-C", str(box), "rev-parse", "main"], capture_output=True, text=True, check=True).stdout.strip() == world.repo.git("rev-parse", "main")
    assert world.repo.git("show", "chore/integration:src/ui/seen-core.txt") == "from core"
    assert world.repo.git("show", "chore/integration:docs/seen-ui.txt") == "from core"
    sent = [(e.key, e.status, e.request["sha"], e.request["host"]) for e in engine.ledger.list_effects(run_id) if e.kind == "base_push"]
    assert sent == [("ui-theme:base_push", "confirmed", workers["core"].integrated_sha, "buildbox")]
    order = [line.split(" ", 1)[1] for line in done.stderr.splitlines() if ": started: " in line or ": integrated: " in line]
    assert [":".join(line.split(":")[:2]) for line in order] == [
        "core: started", "core: integrated", "ui-theme: started", "ui-theme: integrated", "docs: started",
    ]
    engine.close()


def test_a_host_lost_before_provisioning_holds_its_worker_while_the_controllers_goes_on_and_it_starts_once_back(two_hosts: TwoHosts) -> None:
    """The agent controller's door: the build box goes away after preflight; `orch provision` and `orch dispatch` start
    the controller's worker and hold the box's (never failed for it, exit 0); `orch status` names the host; once the
    box answers, `orch wait`'s check-ins provision and dispatch it there, and the run ends PASS."""
    world = two_hosts.world
    plan = two_hosts.plan(remote_worker=True, local_worker=True, integration=True)
    assert world.orch("preflight", str(plan)).returncode == 0
    run_id = json.loads(world.orch("status", "--json").stdout)["run_id"]
    two_hosts.set_down(True)

    provision = world.orch("provision", "--run", run_id)
    dispatch = world.orch("dispatch", "--run", run_id)

    assert (provision.returncode, dispatch.returncode) == (0, 0), provision.stdout + provision.stderr + dispatch.stdout + dispatch.stderr
    held = ("ui-theme: held: host buildbox did not answer during provision (herdr --machine buildbox worktree list: machine 'buildbox' (session acme): "
            "ssh: connect to host me@buildbox port 22: Connection refused); it starts once buildbox answers, at a later check-in")
    assert held in provision.stdout.splitlines(), provision.stdout
    status = world.orch("status", "--run", run_id)
    assert status.stdout.split("hosts not answering:\n", 1)[1] == f"  {held}\n", status.stdout
    states = {w["task"]: w["state"] for w in json.loads(world.orch("status", "--run", run_id, "--json").stdout)["workers"]}
    assert (states["api-pagination"] in ("working", "result"), states["ui-theme"]) == (True, "provisioning"), states  # its agent may be quick

    two_hosts.set_down(False)

    def now() -> dict[str, str]:
        world.orch("wait", "--run", run_id, "--timeout", "10", "--json", timeout=120)
        return {w["task"]: w["state"] for w in json.loads(world.orch("status", "--run", run_id, "--json").stdout)["workers"]}

    eventually(lambda: now() == {"api-pagination": "accepted", "ui-theme": "accepted"}, lambda: f"both accepted: {now()}", timeout_s=240)
    engine = world.engine()
    creates = [e for e in engine.ledger.list_effects(run_id) if e.kind == "worktree_create" and e.task_label == "ui-theme"]
    assert [(e.status, e.request["host"]) for e in creates] == [("confirmed", "buildbox")]
    kinds = [e.kind for e in engine.ledger.events(run_id, task_label="ui-theme") if e.kind in ("host_held", "host_answered")]
    assert kinds == ["host_held", "host_answered"]
    finish = world.orch("finish", "--run", run_id)
    assert finish.returncode == 0, finish.stdout + finish.stderr  # PASS


def test_orch_run_gives_a_host_that_never_comes_back_its_bound_then_ends_partial_naming_it(two_hosts: TwoHosts) -> None:
    """`orch run`: the build box goes away as provisioning first asks it (after preflight passed). The controller's
    worker is provisioned, dispatched, accepted and integrated; the box's is held, then, once nothing else moves and
    three check-in intervals passed, failed with its host named. PARTIAL (exit 10), no crash, no exit 3."""
    world = two_hosts.world
    plan = two_hosts.plan(remote_worker=True, local_worker=True, integration=True)
    data = json.loads(two_hosts.network.read_text())
    data["targets"]["me@buildbox"]["down_at"] = ["worktree list"]
    two_hosts.network.write_text(json.dumps(data))

    done = world.orch("run", str(plan), "--interval", "1", timeout=300)

    assert done.returncode == 10, done.stdout + done.stderr
    run_id = json.loads(world.orch("status", "--json").stdout)["run_id"]
    report = json.loads(world.orch("report", "--run", run_id, "--json").stdout)
    assert report["verdict"] == "PARTIAL"
    states = {w["task"]: w["state"] for w in json.loads(world.orch("status", "--run", run_id, "--json").stdout)["workers"]}
    # A worker that failed before its agent started is kept for inspection, as on the controller.
    assert states == {"api-pagination": "retired", "ui-theme": "retained"}
    failed = [b["text"] for b in report["blockers"] if b["kind"] == "failed"]
    assert len(failed) == 1 and failed[0].startswith("host buildbox did not answer since "), failed
    assert two_hosts.text(failed[0]).endswith(
        "(herdr --machine buildbox worktree list: machine 'buildbox' (session acme): ssh: connect to host me@buildbox port 22: Connection refused); "
        "the run ended before it answered, so it never started; whatever was made for it on buildbox is kept there, never removed blind "
        "(its checkout would be <tmp>/buildbox/src/acme/widgets.worktrees/widgets-feat-ui-theme)"
    ), failed
    said = [line.split(" ", 1)[1] for line in done.stderr.splitlines() if line.split(" ", 1)[-1].startswith("ui-theme: ")]
    assert [line.split(" (", 1)[0] for line in said] == [
        "ui-theme: started: admitted to slot 2 of 4", "ui-theme: held: host buildbox did not answer during provision",
        "ui-theme: provisioning", f"ui-theme: given up: failed: {failed[0].split(' (', 1)[0]}", "ui-theme: retained",
    ], done.stderr


def test_cancel_gives_up_a_remote_worker_on_its_own_host_and_never_touches_the_controllers_pane_of_the_same_id(two_hosts: TwoHosts) -> None:
    """`orch cancel` is retire's ladder with abandon: the build box's agent exits and its pane, workspace and clean
    checkout go there (and the emptied `<checkout>.worktrees/`); the controller's bystander with the very same ids stays."""
    world = two_hosts.world
    plan = two_hosts.plan(remote_worker=True, local_worker=True)
    bystander = world.herdr("workspace", "create", "--cwd", str(two_hosts.root), "--no-focus")["result"]["root_pane"]
    assert world.orch("preflight", str(plan)).returncode == 0
    run_id = json.loads(world.orch("status", "--json").stdout)["run_id"]
    assert world.orch("provision", "--run", run_id).returncode == 0
    remote = world.engine().ledger.get_worker(run_id, "ui-theme")
    assert (remote.host, remote.pane_id, remote.created_workspace_ids) == ("buildbox", bystander["pane_id"], (bystander["workspace_id"],))
    remote_path = str(remote.worktree_path)

    done = world.orch("cancel", run_id, "--reason", "wrong base branch")

    assert done.returncode == 10, done.stdout + done.stderr  # PARTIAL: nothing was dispatched, nothing failed
    states = {w["task"]: w["state"] for w in json.loads(world.orch("status", "--run", run_id, "--json").stdout)["workers"]}
    assert states == {"api-pagination": "retired", "ui-theme": "retired"}, done.stdout
    assert box_herdr(two_hosts, "agent", "list")["result"]["agents"] == []
    assert box_herdr(two_hosts, "workspace", "list")["result"]["workspaces"] == []
    assert (Path(remote_path).exists(), Path(remote_path).parent.exists()) == (False, False)
    assert world.herdr("pane", "get", bystander["pane_id"])["result"]["pane"]["workspace_id"] == bystander["workspace_id"]
    report = json.loads(world.orch("report", "--run", run_id, "--json").stdout)
    items = {(r["what"], r["id"], r.get("host"), r["status"]) for r in report["retired"] if r["task"] == "ui-theme"}
    assert items == {("pane", bystander["pane_id"], "buildbox", "closed"), ("worktree", remote_path, "buildbox", "closed"),
                     ("workspace", bystander["workspace_id"], "buildbox", "closed"), ("workspace", "w1", "buildbox", "closed")}


def test_a_workspace_the_person_had_open_on_the_box_checkout_is_theirs_and_stays_after_the_run(two_hosts: TwoHosts) -> None:
    """orch closes the box's primary-checkout workspace only when its own `worktree create` opened it: one the person
    had open there before the run (herdr makes it the new worktree's group parent) is never touched or reported."""
    world = two_hosts.world
    plan = two_hosts.plan(remote_worker=True)
    theirs = box_herdr(two_hosts, "workspace", "create", "--cwd", str(two_hosts.box_checkout), "--no-focus")["result"]["workspace"]["workspace_id"]
    assert world.orch("preflight", str(plan)).returncode == 0
    run_id = json.loads(world.orch("status", "--json").stdout)["run_id"]
    assert world.orch("provision", "--run", run_id).returncode == 0

    done = world.orch("cancel", run_id, "--reason", "wrong base branch")

    assert done.returncode == 10, done.stdout + done.stderr
    assert [w["workspace_id"] for w in box_herdr(two_hosts, "workspace", "list")["result"]["workspaces"]] == [theirs]
    report = json.loads(world.orch("report", "--run", run_id, "--json").stdout)
    assert theirs not in {r["id"] for r in report["retired"] if r["what"] == "workspace"}


def test_resume_after_the_build_boxs_herdr_restarted_reads_its_world_there_starts_its_worker_again_and_ends_pass(
    two_hosts: TwoHosts, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The build box's herdr server goes away once its worker is ready (its agent started, no packet sent) and the
    person stops `orch run` meanwhile (Ctrl-C); the box's herdr comes back with nothing of before. `orch resume` reads
    the box's world with the box's herdr, starts its worker again there (its checkout reopened, a new workspace, pane
    and agent), and the run ends PASS, integrated at home."""
    import io

    from orchestrator.progress import Progress
    from orchestrator.run import Interrupted, run_plan

    world = two_hosts.world
    for name in ("PATH", "HERDR_SIM_NETWORK"):  # orch's ssh and git run here, in this process: the stand-in ssh first
        monkeypatch.setenv(name, world.env[name])
    engine = world.engine()
    engine.controller = "run"
    real, stopped = engine.herdr.runner, []  # type: ignore[attr-defined]

    def ready() -> bool:
        runs = engine.ledger.list_runs()
        return bool(runs) and engine.ledger.get_worker(runs[0].run_id, "ui-theme").state == "ready"

    def runner(argv: Any, *, env: Any, timeout: float) -> Any:
        # The box's next call once its worker is ready (its agent started, no packet asked for yet).
        if list(argv[1:3]) == ["--machine", "buildbox"] and not stopped and ready():
            stopped.append(argv)
            two_hosts.box.stop()  # a restart's first half: every pane and agent there gone
            raise KeyboardInterrupt  # and the person stops orch run
        return real(argv, env=env, timeout=timeout)

    engine.herdr.runner = runner  # type: ignore[attr-defined]  # the box's herdr (`--machine`) is built from it on first use

    with pytest.raises(Interrupted) as raised:
        run_plan(engine, two_hosts.plan(remote_worker=False, local_worker=True, integration=True), Progress(io.StringIO(), live=False), interval_s=0.3)

    run_id = engine.ledger.list_runs()[0].run_id
    box_worker = engine.ledger.get_worker(run_id, "ui-theme")
    assert (stopped != [], box_worker.state, box_worker.host) == (True, "ready", "buildbox"), raised.value.message
    first_pane = box_worker.pane_id
    engine.close()
    two_hosts.box.__enter__()  # back, empty: a restarted herdr keeps no panes

    resumed = world.orch("resume", run_id, "--interval", "0.3", timeout=600)

    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    said = [line.split(" ", 1)[1] for line in resumed.stderr.splitlines() if "ui-theme: started again:" in line]
    assert said == [f"ui-theme: started again: its pane {first_pane} on host buildbox is gone (herdr on host buildbox restarted, or it was closed, "
                    "while orch was stopped) while it was ready, before any packet was sent, so nothing of its work can be lost; its worktree "
                    f"{two_hosts.box_checkout.parent / 'widgets.worktrees' / 'widgets-feat-ui-theme'} is kept and reused"], resumed.stderr
    engine = world.engine()
    report = json.loads(world.orch("report", "--run", run_id, "--json").stdout)
    assert report["verdict"] == "PASS", report["verdict_reasons"]
    assert [e.kind for e in engine.ledger.events(run_id, task_label="ui-theme") if e.kind == "restarted"] == ["restarted"]
    # Started again on the box from the checkout its first start made (one create there, then an open), and its work
    # fetched home and merged on the controller.
    creates = [(e.key, e.status) for e in engine.ledger.list_effects(run_id, task_label="ui-theme") if e.kind in ("worktree_create", "worktree_open")]
    assert creates == [("ui-theme:worktree_create", "confirmed"), ("ui-theme:start2:worktree_open", "confirmed")]
    merged = world.repo.git("log", "--format=%s", "chore/integration")
    assert sorted(line.split(":")[0] for line in merged.splitlines() if line.startswith(("ui-theme:", "api-pagination:"))) == ["api-pagination", "ui-theme"]
    engine.close()


def test_orch_run_gives_a_host_lost_while_its_worker_works_the_same_bound_then_ends_partial_naming_it(two_hosts: TwoHosts) -> None:
    """`orch run`: the build box goes away once its worker is working (its agent has its packet and works on: down at
    the box's LISTS_BEFORE_DOWN-th `agent list`, after dispatch's acceptance and the first check-ins listed it). The
    check-ins note the host unreachable; the controller's worker is accepted and integrated; once nothing else moves
    and three check-in intervals passed, the box's worker is failed with its host named and its work kept there (its
    checkout and commits on the box, retained). PARTIAL (exit 10), no exit 3."""
    world = two_hosts.world
    plan = two_hosts.plan(remote_worker=True, local_worker=True, integration=True)
    # Works on, never done, its output moving at every check-in (never stalled): only its host going away ends it.
    ticks = "".join(f'[[task.ui-theme]]\ndo = "run"\ncommand = "sleep 0.5; echo tick {n}"\n\n' for n in range(600))
    (two_hosts.box.home / "scenarios.toml").write_text(ticks)
    data = json.loads(two_hosts.network.read_text())
    data["targets"]["me@buildbox"]["down_at"] = ["agent list"] * LISTS_BEFORE_DOWN
    two_hosts.network.write_text(json.dumps(data))

    done = world.orch("run", str(plan), "--interval", "1", timeout=300)

    assert done.returncode == 10, done.stdout + done.stderr
    run_id = json.loads(world.orch("status", "--json").stdout)["run_id"]
    engine = world.engine()
    moves = [str(e.to_state) for e in engine.ledger.events(run_id, task_label="ui-theme") if e.to_state is not None]
    held = [e.detail["stage"] for e in engine.ledger.events(run_id, task_label="ui-theme") if e.kind == "host_held"]
    engine.close()
    assert ("working" in moves, held) == (True, ["work"]), (moves, held, done.stderr)  # lost while working, never held starting
    since = re.compile(r"since \d{4}-\d\d-\d\d \d\d:\d\d:\d\dZ")
    lines = [since.sub("since <at>", two_hosts.text(line)) for line in done.stdout.splitlines() if line.startswith(("Workers:", "Blockers:"))]
    checkout = "<tmp>/buildbox/src/acme/widgets.worktrees/widgets-feat-ui-theme"
    reason = ("host buildbox did not answer since <at> (herdr --machine buildbox agent list: machine 'buildbox' (session acme): ssh: connect to host "
              "me@buildbox port 22: Connection refused); the run ended before it answered, so its work was never brought home; its work is kept on "
              f"buildbox (its checkout {checkout} and its commits there), nothing there touched")
    assert lines == [
        "Workers: api-pagination=retired/accepted+integrated, ui-theme=retained/failed on buildbox",
        f"Blockers: ui-theme failed: {reason}",
    ], done.stdout
    said = [since.sub("since <at>", two_hosts.text(line.split(" ", 1)[1])) for line in done.stderr.splitlines() if line.split(" ", 1)[-1].startswith("ui-theme: ")]
    assert said == ["ui-theme: started: admitted to slot 2 of 4", "ui-theme: working", f"ui-theme: given up: failed: {reason}",
                    "ui-theme: pane kept (2 of 2)", "ui-theme: retained"], done.stderr
