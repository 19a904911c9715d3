"""A remote worker through a real OpenSSH server on 127.0.0.1 (issue 26), with two git repositories (the controller's
and the box's clone): preflight asks the box its host gate's ssh questions through that sshd (and, with the sshd gone,
fails closed naming the box, creating nothing); the worker's callback, sent while no controller runs, is kept in the
box's spool and accepted exactly once when the controller checks in again (`orch wait`); its commits are fetched home
by SHA, verified and integrated on the controller, and nothing is pushed to the box."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from loopback_sshd import ALIAS, LoopbackSshd, available

from herdr_sim import versions
from herdr_sim.testing import SimServer
from orchestrator import spool
from orchestrator.intake import save_message_limit
from orchestrator.remote import run_remote
from registry import WorkerState

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(not available(), reason="no sshd here: `apt-get install -y openssh-server` (.ci/run installs it)"),
]

S = WorkerState
ORCH_BIN = Path(sys.executable).parent
TASK = "api-pagination"


@dataclass
class Fleet:
    """The controller's world and a build box reached over the loopback sshd, with a run whose worker is on the box."""

    world: Any
    sshd: LoopbackSshd
    box_home: Path  # ORCH_HOME on the box
    run_id: str
    prefix: tuple[str, ...]  # the worker's callback command, as its packet gives it
    checkout: Path  # the box's clone, where the worker commits
    pane: str  # the worker's pane on the box's own herdr (its ids are the box's)

    def envelope(self, body: str, kind: str = "update") -> str:
        return f"[herdr-orchestration run={self.run_id} task={TASK} from={TASK} kind={kind} reply-to={self.pane}]\n{body}"

    def call_back(self, text: str) -> str:
        """The worker runs its packet's callback command in its own shell on the box."""
        sent = run_remote(ALIAS, [*self.prefix, text])
        assert sent.returncode == 0, sent.stderr
        return sent.stdout

    def spooled(self) -> list[str]:
        return [e.id for e in spool.pending(spool.folder(self.box_home, self.run_id))]

    def inbox(self) -> list[tuple[str, str, str | None]]:
        engine = self.world.engine()
        try:
            return [(m.source, str(m.verdict), m.kind) for m in engine.ledger.list_inbox(self.run_id)]
        finally:
            engine.close()


@dataclass
class Box:
    """The controller's world, and a build box its herdr reaches as the saved machine `box` and orch's ssh and git reach
    through the real sshd (the alias ``orch-box``), with a plan placing one worker there."""

    world: Any
    sshd: LoopbackSshd
    box_home: Path  # ORCH_HOME on the box
    checkout: Path  # the box's clone
    plan: Path
    sim: SimServer  # the box's own herdr server


@pytest.fixture
def box(make_world: Callable[..., Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Box]:
    """The build box, its sshd serving, its saved machine on the controller, and the plan (no run yet)."""
    if not versions.current().machine_status:
        pytest.skip("saved machines are simulated on the 0.9.5 profile only (herdr machine status is 0.9.2+)")
    world = make_world()
    box_root = tmp_path / "box"
    box_root.mkdir()
    box_checkout = box_root / "src" / "acme" / "widgets"
    subprocess.run(["git", "clone", "--quiet", str(world.repo.path), str(box_checkout)], check=True, timeout=60)
    box_home = box_root / "orch-state"
    # The box's own herdr server, which the controller's herdr reaches as the saved machine `box` (the simulator
    # forwards `herdr --machine` through its network file); orch's ssh and git reach the box through the real sshd.
    sim_home = Path(f"/tmp/orch-e2e-spool-{os.getpid()}-{abs(hash(str(tmp_path))) % 10**8}")  # socket paths stay short
    box_sim = SimServer(sim_home, session="acme")
    box_sim.__enter__()
    # What a shell on the box sees, over the real sshd and through the simulator's forwarding alike.
    box_env = {"PATH": f"{box_sim.paths.bin}:{ORCH_BIN}:/usr/bin:/bin", "HOME": str(box_root), "HERDR_SIM_HOME": str(box_sim.home),
               "HERDR_SOCKET_PATH": str(box_sim.paths.socket_for("acme")), "HERDR_SESSION": "acme",
               "HERDR_SIM_VERSION": versions.current().name, "LANG": "C.UTF-8",
               # Only a shell on the box has these: a check that needs them passes there and nowhere else.
               "ORCH_E2E_HOST": "box", "TMPDIR": str(box_root / "tmp")}  # fmt: skip
    (box_root / "tmp").mkdir()
    server = LoopbackSshd(tmp_path / "sshd", box_env).start()
    try:
        monkeypatch.setenv("PATH", f"{server.bin_dir}:{os.environ['PATH']}")  # the worker's own ssh to its box
        world.env["PATH"] = f"{server.bin_dir}:{world.env['PATH']}"
        network = tmp_path / "network.json"
        network.write_text(json.dumps({"targets": {ALIAS: {"home": str(box_sim.home), "env": box_env, "cwd": str(box_root)}}}))
        world.env["HERDR_SIM_NETWORK"] = str(network)
        world.herdr("machine", "add", ALIAS, "--label", "box", "--remote-session", "acme")
        plan = world.write_plan(f"""\
organization = "acme"
repo = "widgets"
base = "main"

[hosts.box]
machine = "box"
ssh = "{ALIAS}"
checkout = "{box_checkout}"
orch = "{ORCH_BIN / 'orch'}"
orch_home = "{box_home}"

[[workers]]
task = "{TASK}"
objective = "Add cursor pagination."
deliverable = "Commits."
branch = "feat/api-pagination"
claim = ["src/api/**"]
verify = ["test -f src/api/pages.py"]
host = "box"

[integration]
enabled = true
branch = "chore/integrate-fleet"
""")
        yield Box(world, server, box_home, box_checkout, plan, box_sim)
    finally:
        server.stop()
        box_sim.__exit__(None, None, None)
        shutil.rmtree(sim_home, ignore_errors=True)


@pytest.fixture
def fleet(box: Box) -> Fleet:
    """The box with a run whose worker is on it."""
    world, plan, box_checkout = box.world, box.plan, box.checkout
    # The run as provisioning leaves it: its plan snapshot, its saved message limit, and the worker registered on the
    # box, dispatched, in a pane of the box's own herdr (a check-in reads the worker there, so the pane must be real).
    made = box.sim.run(["workspace", "create", "--cwd", str(box_checkout), "--no-focus"])
    pane = json.loads(made.stdout)["result"]["root_pane"]["pane_id"]
    engine = world.engine()
    run_id = f"{world.controller_pane}-20261202T070000Z"
    base = world.repo.git("rev-parse", "main")
    run = engine.ledger.create_run(run_id, controller_target=world.controller_pane, organization="acme", repo="widgets",
                                   repo_path=world.repo.path, base_ref="main", base_sha=base, plan_path=plan)  # fmt: skip
    engine.run_dir(run_id).mkdir(parents=True, exist_ok=True)
    shutil.copy(plan, engine.run_dir(run_id) / "plan.toml")
    save_message_limit(engine, run_id, 65536)
    engine.ledger.add_worker(run_id, TASK, name=TASK, kind="codex", objective="x", pane_id=pane, reply_target=pane, host="box",
                             branch="feat/api-pagination", base_sha=base, claimed_files=("src/api/**",),
                             worktree_path=str(box_checkout))  # fmt: skip
    engine.ledger.transition(run_id, TASK, S.PROVISIONING, S.READY)
    engine.ledger.transition(run_id, TASK, S.READY, S.DISPATCHED)
    prefix = engine.callback_prefix(run, "box")
    engine.close()
    return Fleet(world, box.sshd, box.box_home, run_id, prefix, box_checkout, pane)


def test_a_callback_sent_while_the_controller_is_stopped_is_accepted_once_after_it_checks_in(fleet: Fleet) -> None:
    # No controller process runs: the worker's callback is kept on its own host, durable, before anyone collects it.
    said = fleet.call_back(fleet.envelope("Parser done, starting on tests"))
    (ident,) = fleet.spooled()
    assert said == f"spooled {ident} for run {fleet.run_id} on this host: the controller judges it when it next checks in\n"
    assert fleet.prefix == ("env", f"ORCH_HOME={fleet.box_home}", str(ORCH_BIN / "orch"), "inbox", "add", "--spool", "--run", fleet.run_id)
    assert fleet.inbox() == []

    # The controller comes back: its first check-in collects the spool over ssh and judges the message once.
    waited = fleet.world.orch("wait", "--run", fleet.run_id, "--timeout", "0", "--json")
    assert waited.returncode == 0, waited.stderr
    notes = [(o["what"], o["task"], o["text"]) for o in json.loads(waited.stdout)["observations"] if o["what"] == "update"]
    assert notes == [("update", TASK, "Parser done, starting on tests")]
    assert fleet.inbox() == [(f"spool:box:{ident}", "accepted", "update")]
    assert fleet.spooled() == []

    # Another check-in, with a second callback spooled meanwhile: the first is not recorded again, the second once.
    # (The worker's pane on the box runs no agent, only a shell, so the first check-in, reading it there, failed the
    # worker: "its agent exited outside orch"; the late update is kept aside out of turn.)
    second = fleet.call_back(fleet.envelope("Tests written")).split()[1]
    again = fleet.world.orch("observe", "--run", fleet.run_id, "--once", "--json")
    assert again.returncode == 0, again.stderr
    assert fleet.inbox() == [(f"spool:box:{ident}", "accepted", "update"), (f"spool:box:{second}", "kept_aside", "update")]
    assert fleet.spooled() == []


def test_a_box_whose_sshd_is_gone_keeps_the_callback_until_it_is_back(fleet: Fleet) -> None:
    fleet.call_back(fleet.envelope("Parser done"))
    (ident,) = fleet.spooled()
    fleet.sshd.stop()

    # The box unreachable: its spool is not collected, and the check-in stops the run as a herdr outage does (exit 3).
    waited = fleet.world.orch("wait", "--run", fleet.run_id, "--timeout", "0", "--json")
    assert waited.returncode == 3, waited.stdout + waited.stderr
    assert fleet.inbox() == []
    assert fleet.spooled() == [ident]  # still there, durable

    fleet.sshd.serve()  # the box is back: the next wait takes the run up and collects the callback, once
    again = fleet.world.orch("wait", "--run", fleet.run_id, "--timeout", "0", "--json")
    assert again.returncode == 0, again.stdout + again.stderr
    assert fleet.inbox() == [(f"spool:box:{ident}", "accepted", "update")]
    assert fleet.spooled() == []


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, check=True, timeout=60).stdout.strip()


def _commit_on_the_box(fleet: Fleet) -> str:
    """The worker's commit in its checkout on the box, on its branch; its SHA."""
    box = fleet.checkout
    _git(box, "switch", "--quiet", "-c", "feat/api-pagination")
    (box / "src" / "api").mkdir(parents=True)
    (box / "src" / "api" / "pages.py").write_text("PAGE = 50\n")
    _git(box, "add", "-A")
    _git(box, "commit", "--quiet", "-m", "feat: cursor pages")
    return _git(box, "rev-parse", "HEAD")


def test_a_remote_workers_commits_are_fetched_home_by_sha_verified_and_integrated_there(fleet: Fleet) -> None:
    box = fleet.checkout
    head = _commit_on_the_box(fleet)
    box_refs = _git(box, "for-each-ref", "--format=%(refname) %(objectname)")
    (box / "REPORT.md").write_text("# Pages\nCursor pagination, 50 a page.\n")  # a report file on the box, in its checkout
    fleet.call_back(fleet.envelope(
        f"Status: done\nCommits: {head}\nChanged files: src/api/pages.py\nChecks:\n- test -f src/api/pages.py => exit 0\n"
        f"Report: {box / 'REPORT.md'}\nResidual risk: none",
        kind="result",
    ))

    # The check-in collects the result, reads the head back on the box, fetches that SHA home and verifies it here.
    waited = fleet.world.orch("wait", "--run", fleet.run_id, "--timeout", "0", "--json")
    assert waited.returncode == 0, waited.stderr
    observed = [(o["what"], o["task"], o["text"]) for o in json.loads(waited.stdout)["observations"] if o["what"] in ("report", "verified")]
    # Its report is a file on the box: read there by the box's orch (the same reader), never looked for here.
    assert observed == [("report", TASK, f"{box / 'REPORT.md'} recorded (38 characters)"), ("verified", TASK, "accepted")]
    home = fleet.world.repo.path
    assert _git(home, "rev-parse", f"refs/orch/{fleet.run_id.replace(':', '_')}/{TASK}") == head
    assert _git(home, "for-each-ref", "--format=%(refname)", "refs/heads") == "refs/heads/main"  # no branch of the worker's at home

    integrated = fleet.world.orch("integrate", "--run", fleet.run_id, "--json")
    assert integrated.returncode == 0, integrated.stdout + integrated.stderr
    items = [(i["task"], i["outcome"], i["head_sha"]) for i in json.loads(integrated.stdout)["items"]]
    assert items == [(TASK, "merged", head)]
    subprocess.run(["git", "-C", str(home), "merge-base", "--is-ancestor", head, "refs/heads/chore/integrate-fleet"], check=True, timeout=60)
    assert _git(box, "for-each-ref", "--format=%(refname) %(objectname)") == box_refs  # nothing was pushed to the box


def test_a_link_dropped_after_the_ledger_write_leaves_the_message_recorded_once(fleet: Fleet, tmp_path: Path) -> None:
    # The box's orch, as the plan names it, drops the ssh session of the first `inbox ack` (its remote shell killed
    # before the entry is removed): the controller has recorded the message, the box still holds it.
    dropped = tmp_path / "dropped-once"
    wrapper = tmp_path / "box-orch"
    wrapper.write_text(f'#!/bin/sh\nif [ "$1 $2" = "inbox ack" ] && [ ! -e {dropped} ]; then : >{dropped}; kill -9 $PPID; exit 255; fi\n'
                       f'exec {ORCH_BIN / "orch"} "$@"\n')  # fmt: skip
    wrapper.chmod(0o755)
    engine = fleet.world.engine()
    run = engine.ledger.get_run(fleet.run_id)
    snapshot = engine.run_dir(fleet.run_id) / "plan.toml"
    snapshot.write_text(snapshot.read_text().replace(f'orch = "{ORCH_BIN / "orch"}"', f'orch = "{wrapper}"'))
    prefix = engine.callback_prefix(run, "box")
    engine.close()
    sent = run_remote(ALIAS, [*prefix, fleet.envelope("Parser done")])
    assert sent.returncode == 0, sent.stderr
    (ident,) = fleet.spooled()

    first = fleet.world.orch("wait", "--run", fleet.run_id, "--timeout", "0", "--json")
    assert first.returncode == 0, first.stderr
    notes = [(o["what"], o["text"].split(" (")[0]) for o in json.loads(first.stdout)["observations"] if o["what"] in ("update", "host_unreachable")]
    assert notes == [("host_unreachable", "host box: cannot acknowledge its spool entries"), ("update", "Parser done")]
    assert (dropped.exists(), fleet.spooled()) == (True, [ident])  # recorded at home, still held on the box

    again = fleet.world.orch("observe", "--run", fleet.run_id, "--once", "--json")
    assert again.returncode == 0, again.stderr
    assert fleet.inbox() == [(f"spool:box:{ident}", "accepted", "update")]  # once, though collected twice
    assert fleet.spooled() == []



def _what_exists(box: Box) -> dict[str, Any]:
    """Everything preflight could create, on the controller and on the box."""
    engine = box.world.engine()
    try:
        runs = [r.run_id for r in engine.ledger.list_runs()]
    finally:
        engine.close()
    return {
        "runs": runs, "run folders": sorted(p.name for p in (box.world.orch_home / "runs").glob("*")),
        "controller workspaces": box.world.herdr("workspace", "list"), "controller tabs": box.world.herdr("tab", "list"),
        "box workspaces": box.sim.run(["workspace", "list"]).stdout, "box checkouts": _git(box.checkout, "worktree", "list"),
        "box orch home": box.box_home.exists(),
    }  # fmt: skip



CHECKLIST = """\
ok   herdr env       HERDR_ENV=1
ok   plan            acme/widgets, base main, 1 worker (codex)
ok   herdr           herdr 0.9.5 client, protocol 22
ok   capabilities    all 28 herdr commands the run uses are in herdr api schema
ok   server          running herdr 0.9.5, protocol 22, compatible
ok   features        completion_seq for finished turns, shift+tab for plan mode, resume commands for claude, opencode and pi sessions
ok   session         acme serves organization acme
ok   integrations    codex current (v8)
ok   caller pane     w1:p1 in workspace w1, tab w1:t1: a shell, not an agent; controller target pinned to w1:p1
ok   agents          none running
ok   repo checkout   <tmp>/src/acme/widgets: primary checkout; default branch main (from the base main)
ok   base ref        main is <base>
"""


def _said(box: Box, out: str, run_id: str = "<run>") -> str:
    """Preflight's words with this test's paths, run id, base commit and sshd port as placeholders."""
    text = out.replace(str(box.world.src_root.parent), "<tmp>").replace(box.world.repo.git("rev-parse", "main"), "<base>")
    return re.sub(r"port [0-9]+:", "port <port>:", text.replace(run_id, "<run>").replace(run_id.replace(":", "_"), "<run>"))


def test_preflight_passes_every_host_gate_through_the_real_sshd(box: Box) -> None:
    # The saved machine and its server are asked through the controller's herdr (the simulator plays herdr's own SSH
    # hop); the box's integrations, its agents' executables, its checkout holding the base and its orch are asked
    # over ssh, here through the real sshd on 127.0.0.1.
    result = box.world.orch("preflight", str(box.plan))

    assert result.returncode == 0, result.stdout + result.stderr
    run_id = result.stdout.splitlines()[-1]
    assert (_said(box, result.stdout, run_id), _said(box, result.stderr, run_id)) == (
        CHECKLIST
        + "ok   hosts           1 host ready: api-pagination on box\n"
        "                     note: box: saved machine box reachable, herdr 0.9.5 in session acme, integrations codex current (v8), "
        "codex installed, checkout <tmp>/box/src/acme/widgets has the base, orch 0.1.0\n"
        'ok   repo workspace  w1 "widgets" (the caller\'s workspace) serves <tmp>/src/acme/widgets\n'
        'ok   repo tab        w1:t1 renamed "1" -> "widgets"\n'
        "ok   run             1 worker registered as queued (concurrency 4); plan snapshot <tmp>/orch-home/runs/<run>/plan.toml\n"
        "<run>\n",
        "Next: provision: the run is recorded: create its workers' tabs and start their agents: `orch provision --run <run>`\n",
    )


def test_preflight_fails_closed_naming_the_box_when_its_sshd_is_gone_and_creates_nothing(box: Box) -> None:
    # herdr's saved machine still answers (its own link), but orch's ssh to the box is refused: the host gate fails at
    # its first ssh question, before the run's workspace, tab, ledger row or anything on the box is made.
    box.sshd.stop()
    before = _what_exists(box)

    result = box.world.orch("preflight", str(box.plan))

    assert (result.returncode, _said(box, result.stdout), _said(box, result.stderr)) == (
        1,
        CHECKLIST + "FAIL hosts           box: ssh orch-box herdr integration status: ssh failed: ssh: connect to host "
        "127.0.0.1 port <port>: Connection refused\n",
        "orch: host box: cannot run herdr there over ssh (ssh orch-box herdr integration status: ssh failed: ssh: connect to host "
        "127.0.0.1 port <port>: Connection refused)\nhint: orch needs `ssh -o BatchMode=yes orch-box herdr --version` to work without a prompt\n",
    )
    assert _what_exists(box) == before
    assert (before["runs"], before["run folders"], before["box orch home"]) == ([], [], False)


def _checks_on_the_box(fleet: Fleet, verify: str) -> None:
    """The run's plan (its snapshot) re-runs the worker's checks on the box (`verify_on = "host"`): ``verify``."""
    engine = fleet.world.engine()
    snapshot = engine.run_dir(fleet.run_id) / "plan.toml"
    engine.close()
    text = snapshot.read_text().replace('verify = ["test -f src/api/pages.py"]', f"verify = [{verify}]")
    snapshot.write_text(text.replace('host = "box"\n', 'host = "box"\nverify_on = "host"\n'))


def _result_on_the_box(fleet: Fleet, check: str) -> str:
    """The worker's commit on the box and its result, sent through its spool; its head."""
    head = _commit_on_the_box(fleet)
    fleet.call_back(fleet.envelope(
        f"Status: done\nCommits: {head}\nChanged files: src/api/pages.py\nChecks:\n- {check} => exit 0\nResidual risk: none", kind="result",
    ))  # fmt: skip
    return head


def test_a_remote_workers_checks_rerun_on_its_host_where_the_plan_says(fleet: Fleet) -> None:
    # The check passes only in a shell on the box (ORCH_E2E_HOST), and only in a checkout of the worker's commit.
    check = 'test -f src/api/pages.py && test "$ORCH_E2E_HOST" = box'
    _checks_on_the_box(fleet, f"'{check}'")
    head = _result_on_the_box(fleet, check)
    (fleet.checkout / "src" / "api" / "pages.py").unlink()  # the agent can still touch its own checkout: never used

    waited = fleet.world.orch("wait", "--run", fleet.run_id, "--timeout", "0", "--json")

    assert waited.returncode == 0, waited.stdout + waited.stderr
    observed = [(o["what"], o["text"]) for o in json.loads(waited.stdout)["observations"] if o["what"] == "verified"]
    assert observed == [("verified", "accepted")]
    engine = fleet.world.engine()
    try:
        worker = engine.ledger.get_worker(fleet.run_id, TASK)
        cause = [e.detail["cause"] for e in engine.ledger.events(fleet.run_id, task_label=TASK) if e.to_state == S.ACCEPTED]
    finally:
        engine.close()
    found = json.loads(worker.controller_verification or "{}")
    assert (found["head_sha"], [(c["command"], c["exit_code"], c["output_tail"], c["error"]) for c in found["checks"]]) == (head, [(check, 0, "", None)])
    assert [(c["checks_on"], c["checks"]) for c in cause] == [("box", [{"command": check, "exit_code": 0, "error": None}])]
    report = fleet.world.orch("report", "--run", fleet.run_id)
    assert [line for line in report.stdout.splitlines() if " -> accepted" in line] == [f"Verification: {TASK}: `{check}` exit 0 on box -> accepted"], report.stdout
    # Its scratch checkout and folder are gone from the box; the box's repository forgot it.
    assert list((fleet.checkout.parents[2] / "tmp").iterdir()) == []
    assert _git(fleet.checkout, "worktree", "list", "--porcelain").count("worktree ") == 1


def test_a_box_gone_while_its_checks_rerun_there_leaves_the_worker_unverified_naming_it(fleet: Fleet) -> None:
    # The first check takes the box's sshd down (the listener killed; its own session ends normally): the next check
    # cannot be run there. The worker is blocked with the reason, never accepted; its checkout on the box stays.
    _checks_on_the_box(fleet, f"'kill -9 {fleet.sshd.proc.pid if fleet.sshd.proc else 0}', 'true'")
    _result_on_the_box(fleet, "true")

    waited = fleet.world.orch("wait", "--run", fleet.run_id, "--timeout", "0", "--json")

    engine = fleet.world.engine()
    try:
        worker = engine.ledger.get_worker(fleet.run_id, TASK)
    finally:
        engine.close()
    found = json.loads(worker.controller_verification or "{}")
    said = [re.sub(r"port [0-9]+:", "port <port>:", r) for r in found["reasons"]]
    assert (worker.state, said) == (S.BLOCKED, [
        "check `true` could not run on host box: host box is unreachable (ssh orch-box true: ssh failed: ssh: connect to host 127.0.0.1 "
        "port <port>: Connection refused) (evidence cannot be reproduced)",
        "worker reported `true` passing, but it does not pass on re-run on host box",
    ]), waited.stdout + waited.stderr
    assert worker.final_disposition is S.BLOCKED  # integration pauses for it; `orch verify` again once the box answers
