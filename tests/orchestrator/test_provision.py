"""Provisioning: its pure parts (split direction, the rendering, the fetch gate on real repos) and the whole phase
against the shared fake herdr with real git worktrees (the simulator's walk is tests/e2e/test_provision.py)."""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from fake_herdr import FakeHerdr
from provision_world import THREE

from orchestrator import git
from orchestrator.clock import FakeClock
from orchestrator.config import Settings
from orchestrator.engine import Engine
from orchestrator.herdr_models import LayoutPane, PaneLayoutSnapshot, Rect
from orchestrator.provision import ProvisionResult, SharedRead, WorkerOutcome, _fetch_error, choose_direction, provision, render_provision
from registry import Run, WorkerState

WT = "/home/me/src/acme/widgets.worktrees"


def layout(width: int, height: int) -> PaneLayoutSnapshot:
    rect = Rect(x=0, y=0, width=width, height=height)
    return PaneLayoutSnapshot(workspace_id="w1", tab_id="w1:t2", zoomed=False, area=rect, focused_pane_id="w1:p2",
                              panes=(LayoutPane(pane_id="w1:p2", focused=True, rect=rect),), splits=())


@pytest.mark.parametrize(
    ("width", "height", "direction"),
    [(200, 50, "right"), (160, 50, "right"), (159, 50, "down"), (100, 50, "down"), (200, 101, "down"), (300, 150, "right")],
)
def test_split_right_only_when_both_halves_stay_wide(width: int, height: int, direction: str) -> None:
    assert choose_direction(layout(width, height), "w1:p2") == direction


def outcome(**fields: Any) -> WorkerOutcome:
    return WorkerOutcome(**{"name": fields["task"], "kind": "codex", "placement": "worktree", **fields})


def test_render_ready_run(golden: Callable[[str, str], None]) -> None:
    result = ProvisionResult(run_id="w1:p1-20261130T080000Z", workspace_id="w1", workers=(
        outcome(task="api-pagination", state="ready", pane_id="w1:p2", tab_label="widgets-feat-api-pagination", worktree_path=f"{WT}/widgets-feat-api-pagination",
                branch="feat/api-pagination", created=("worktree", "tab", "agent"), notes=("fetched origin main", "workspace w2 closed (by herdr when its pane moved out)")),
        outcome(task="api-tests", placement="sibling", state="ready", pane_id="w1:p4", tab_label="widgets-feat-api-pagination",
                worktree_path=f"{WT}/widgets-feat-api-pagination", branch="feat/api-pagination", created=("pane (right of w1:p2)", "agent")),
        outcome(task="pagination-docs", kind="claude", state="ready", pane_id="w1:p3", tab_label="widgets-docs-pagination-guide",
                worktree_path=f"{WT}/widgets-docs-pagination-guide", branch="docs/pagination-guide", reused=("worktree", "tab"), created=("agent",),
                notes=("tab label 'docs' mended to 'widgets-docs-pagination-guide'",)),
    ))  # fmt: skip
    assert result.ok
    golden("provision_ready.txt", render_provision(result))


def test_render_failures_and_a_rerun(golden: Callable[[str, str], None]) -> None:
    result = ProvisionResult(run_id="w1:p1-20261130T080000Z", workspace_id="w1", workers=(
        outcome(task="api-pagination", state="ready", already=True, pane_id="w1:p2", tab_label="widgets-feat-api-pagination",
                worktree_path=f"{WT}/widgets-feat-api-pagination", branch="feat/api-pagination"),
        outcome(task="pagination-docs", state="failed", branch="docs/pagination-guide", tab_label="widgets-docs-pagination-guide",
                worktree_path=f"{WT}/widgets-docs-pagination-guide", created=("worktree",),
                error="setup command `make deps` failed (exit 2) in /x; the checkout and tab are kept:\nmake: *** No rule to make target 'deps'.  Stop."),
        outcome(task="api-docs", state="provisioning", branch="docs/api", error="pane_split for api-docs was started by an earlier orch process and its outcome is unknown (effect 7)",
                notes=("left in provisioning: an earlier process's effect is in flight",)),
    ))  # fmt: skip
    assert not result.ok
    golden("provision_failed.txt", render_provision(result))


def test_fetch_error_keeps_gits_exact_words_and_names_authentication() -> None:
    denied = git.GitResult(("git",), 128, "", "git@github.com: Permission denied (publickey).\nfatal: Could not read from remote repository.\n")
    assert _fetch_error(denied, "origin", "main") == (
        "fetch gate: git fetch origin main failed with an authentication failure; nothing was created (never provision on a stale checkout): "
        "git@github.com: Permission denied (publickey).\nfatal: Could not read from remote repository."
    )
    other = git.GitResult(("git",), 1, "", "fatal: unable to access 'x': Could not resolve host: x\n")
    assert _fetch_error(other, "origin", "main").startswith("fetch gate: git fetch origin main failed with exit 1; ")


def test_fetch_branch_against_a_real_remote(git_repo: Any, tmp_path: Path) -> None:
    origin = tmp_path / "origin.git"
    git_repo.git("clone", "--quiet", "--bare", str(git_repo.path), str(origin))
    git_repo.git("remote", "add", "origin", str(origin))

    assert git.remotes(git_repo.path) == ["origin"]
    assert git.fetch_branch(git_repo.path, "origin", "main").returncode == 0
    assert git.rev_parse(git_repo.path, "origin/main") == git_repo.head()
    missing = git.fetch_branch(git_repo.path, "origin", "feat/new")
    assert missing.returncode != 0 and git.missing_remote_ref(missing.stderr)
    assert git.upstream_of(git_repo.path, "main") is None




# --- SharedRead: one tab list for the workers reading back at the same time ---


class GatedRead:
    """A read that blocks until the test opens its gate; counts reads and returns their sequence number."""

    def __init__(self) -> None:
        self.gates: list[threading.Event] = []
        self.began = threading.Semaphore(0)

    def __call__(self) -> int:
        gate = threading.Event()
        self.gates.append(gate)
        self.began.release()
        assert gate.wait(10)
        return len(self.gates)


def test_shared_read_serves_only_callers_that_asked_before_it_began() -> None:
    read = GatedRead()
    shared: SharedRead[int] = SharedRead(read)
    answers: dict[str, int] = {}

    def ask(name: str) -> threading.Thread:
        thread = threading.Thread(target=lambda: answers.__setitem__(name, shared.get()))
        thread.start()
        return thread

    first = ask("a")
    assert read.began.acquire(timeout=10)  # read 1 runs for a
    later = [ask("b"), ask("c")]  # they asked after read 1 began: it cannot answer them
    assert shared.wait_for_waiting(2)
    read.gates[0].set()
    first.join(10)
    assert read.began.acquire(timeout=10)  # one read 2, for both of them
    read.gates[1].set()
    for thread in later:
        thread.join(10)

    assert answers == {"a": 1, "b": 2, "c": 2}
    assert shared.reads == 2


def test_shared_read_failure_reaches_every_caller_it_served() -> None:
    def broken() -> int:
        raise RuntimeError("herdr tab list: server gone")

    shared: SharedRead[int] = SharedRead(broken)
    with pytest.raises(RuntimeError, match="server gone"):
        shared.get()
    with pytest.raises(RuntimeError, match="server gone"):
        shared.get()
    assert shared.reads == 2


def test_a_branch_that_does_not_hold_the_pinned_base_fails_the_worker_closed(git_repo: Any) -> None:
    from types import SimpleNamespace

    from orchestrator.provision import _Fail, _starts_from

    pinned = git_repo.head()
    git_repo.git("branch", "feat/on-base")
    # herdr checks an existing local branch out as it is: one left on another history must not become a worker's start.
    git_repo.git("checkout", "--quiet", "--orphan", "feat/elsewhere")
    other = git_repo.commit("elsewhere", {"README.md": "# elsewhere\n"})
    git_repo.git("checkout", "--quiet", "main")
    rnd = SimpleNamespace(repo_path=str(git_repo.path))

    _starts_from(rnd, "feat/on-base", pinned, "the existing branch feat/on-base", then="nothing was created")  # type: ignore[arg-type]
    with pytest.raises(_Fail) as failed:
        _starts_from(rnd, "feat/elsewhere", pinned, "the existing branch feat/elsewhere", then="nothing was created")  # type: ignore[arg-type]

    assert (failed.value.step, failed.value.message) == (
        "create",
        f"the existing branch feat/elsewhere is at {other[:12]}, which does not descend from the base {pinned[:12]} this run starts every worker from; nothing was created",
    )


# --- the whole phase against the shared fake herdr (tests/helpers/fake_herdr.py) and real git ---

RUN_ID = "w1:p1-20261130T080000Z"
READY_SCREENS = {"codex": "› \n", "claude": "❯ \n"}  # each kind's input line (orchestrator/quirks.py ready signs)
_PARTS = THREE.split("\n[[workers]]\n")  # the header, then one part per worker
ONE = "\n[[workers]]\n".join(_PARTS[:2])
TWO = "\n[[workers]]\n".join([_PARTS[0], _PARTS[1], _PARTS[3]])  # two branch owners, no sibling
MUTATING = ("worktree create", "worktree open", "pane move", "pane split", "agent start", "workspace close", "tab rename")


def fake_run(tmp_path: Path, repo: Any, herdr: FakeHerdr, plan_text: str = THREE) -> tuple[Engine, Run]:
    """What preflight leaves behind (as tests/helpers/provision_world.py does on the simulator), over the fake."""
    settings = Settings(home=tmp_path / "home", orch_home=tmp_path / "orch", policy_dir=tmp_path / "policies", src_root=tmp_path / "src")
    engine = Engine(settings=settings, herdr=herdr, clock=FakeClock(), env={})
    snapshot = engine.run_dir(RUN_ID) / "plan.toml"
    snapshot.parent.mkdir(parents=True)
    snapshot.write_text(plan_text.format(base="main"))
    ledger = engine.ledger
    ledger.create_run(RUN_ID, controller_target="w1:p1", organization="acme", repo="widgets", repo_path=str(repo.path), base_ref="main", plan_path=str(snapshot))
    ledger.update_run(RUN_ID, workspace_id="w1", repo_tab_id="w1:t1", default_branch="main", base_sha=repo.head())
    for w in engine.plan_for(ledger.get_run(RUN_ID)).workers:
        ledger.add_worker(RUN_ID, w.task, name=w.name, kind=w.kind, objective=w.worker.objective, claimed_files=w.worker.claim, host=w.host)
    return engine, ledger.get_run(RUN_ID)


def mutations(herdr: FakeHerdr) -> list[str]:
    return [c for c in herdr.commands() if c in MUTATING]


def test_three_workers_get_their_layout_contract_tabs_and_a_second_call_creates_nothing(tmp_path: Path, git_repo: Any) -> None:
    herdr = FakeHerdr(cwd=git_repo.path, ready_screens=READY_SCREENS)
    engine, run = fake_run(tmp_path, git_repo, herdr)

    result = provision(engine, run)

    wt = tmp_path / "src" / "acme" / "widgets.worktrees"
    # Workers run concurrently and race for pane and workspace numbers: those are read from the ledger.
    text = render_provision(result).replace(str(wt), "<wt>")
    assert re.sub(r" {2,}", "  ", text) == (
        f"provision {RUN_ID} (workspace w1): 3 ready, 0 failed\n"
        "task  state  pane  tab  path  done\n"
        f"api-pagination  ready  {panes(engine)['api-pagination']}  widgets-feat-api-pagination  <wt>/widgets-feat-api-pagination  created worktree, tab, agent\n"
        f"api-tests  ready  {panes(engine)['api-tests']}  widgets-feat-api-pagination  <wt>/widgets-feat-api-pagination  created pane (right of {panes(engine)['api-pagination']}), agent\n"
        f"pagination-docs  ready  {panes(engine)['pagination-docs']}  widgets-docs-pagination-guide  <wt>/widgets-docs-pagination-guide  created worktree, tab, agent\n"
        "api-pagination: note: no remote: fetch skipped\n"
        f"api-pagination: note: workspace {herdr_side(engine, 'api-pagination')} closed (by herdr when its pane moved out)\n"
        "pagination-docs: note: no remote: fetch skipped\n"
        f"pagination-docs: note: workspace {herdr_side(engine, 'pagination-docs')} closed (by herdr when its pane moved out)\n"
    )
    # The worktree tabs sit in the repo workspace beside the controller's tab; the sibling is a split of its owner.
    tabs = {t.tab_id: t.label for t in herdr.tab_list(workspace="w1")}
    workers = {w.task_label: w for w in engine.ledger.list_workers(RUN_ID)}
    assert sorted(tabs.values()) == ["1", "widgets-docs-pagination-guide", "widgets-feat-api-pagination"]
    assert workers["api-tests"].tab_id == workers["api-pagination"].tab_id and tabs[workers["api-tests"].tab_id] == "widgets-feat-api-pagination"
    assert ("pane", "split", "--pane", workers["api-pagination"].pane_id, "--direction", "right",
            "--cwd", str(wt / "widgets-feat-api-pagination"), "--no-focus") in herdr.argvs()  # fmt: skip
    assert [w.workspace_id for w in herdr.workspace_list()] == ["w1"]
    for task, folder, branch in (("api-pagination", "widgets-feat-api-pagination", "feat/api-pagination"), ("pagination-docs", "widgets-docs-pagination-guide", "docs/pagination-guide")):
        w = workers[task]
        assert (w.worktree_path, w.branch, w.tab_label, w.state) == (str(wt / folder), branch, folder, WorkerState.READY)
        assert git_repo.git("rev-parse", "--abbrev-ref", "HEAD", cwd=wt / folder) == branch
    assert {a.name: (a.pane_id, a.agent) for a in herdr.agent_list()} == {t: (w.pane_id, w.kind) for t, w in workers.items()}
    assert sorted(mutations(herdr)) == sorted(["worktree create", "pane move", "worktree create", "pane move", "pane split", "agent start", "agent start", "agent start"])

    before = len(herdr.calls)
    again = provision(engine, engine.ledger.get_run(RUN_ID))
    assert herdr.calls[before:] == []  # every worker is past provisioning: herdr is not even asked
    assert [(w.task, w.state, w.already) for w in again.workers] == [(t, "ready", True) for t in workers]


def panes(engine: Engine) -> dict[str, str]:
    return {w.task_label: w.pane_id or "-" for w in engine.ledger.list_workers(RUN_ID)}


def herdr_side(engine: Engine, task: str) -> str:
    """The side workspace ``worktree create`` opened for a worker (closed by herdr when its pane moved out)."""
    return engine.ledger.get_worker(RUN_ID, task).created_workspace_ids[0]


def test_an_existing_checkout_and_tab_for_the_branch_are_reused_and_nothing_is_created_twice(tmp_path: Path, git_repo: Any) -> None:
    herdr = FakeHerdr(cwd=git_repo.path, ready_screens=READY_SCREENS)
    engine, run = fake_run(tmp_path, git_repo, herdr, ONE)
    path = tmp_path / "src" / "acme" / "widgets.worktrees" / "widgets-feat-api-pagination"
    git_repo.git("worktree", "add", "--quiet", "-b", "feat/api-pagination", str(path))
    tab = herdr.tab_create(workspace="w1", cwd=path, label="widgets-feat-api-pagination")
    herdr.calls.clear()

    result = provision(engine, run)

    outcome = result.workers[0]
    assert (outcome.state, outcome.pane_id, outcome.reused, outcome.created, outcome.notes) == (
        "ready", tab.root_pane.pane_id, ("worktree", "tab"), ("agent",), ("no remote: fetch skipped",))
    assert mutations(herdr) == ["agent start"]
    assert [t.label for t in herdr.tab_list(workspace="w1")] == ["1", "widgets-feat-api-pagination"]
    worker = engine.ledger.get_worker(RUN_ID, "api-pagination")
    assert (worker.created_worktree_paths, worker.created_workspace_ids) == ((), ())


def test_a_failed_agent_start_fails_only_that_worker(tmp_path: Path, git_repo: Any) -> None:
    herdr = FakeHerdr(cwd=git_repo.path, ready_screens=READY_SCREENS)
    engine, run = fake_run(tmp_path, git_repo, herdr, TWO)
    herdr.fail_next("agent start", "agent_start_failed", "agent process exited before becoming interactive", word="api-pagination")

    result = provision(engine, run)

    assert [(w.task, w.state, w.error) for w in result.workers] == [
        ("api-pagination", "failed", "agent start failed: herdr agent start: agent_start_failed: agent process exited before becoming interactive"),
        ("pagination-docs", "ready", None),
    ]
    failed = engine.ledger.get_worker(RUN_ID, "api-pagination")
    assert failed.pane_id is not None and failed.worktree_path is not None  # the checkout and tab are kept for a look
    wt, pane = str(tmp_path / "src" / "acme" / "widgets.worktrees"), panes(engine)
    assert re.sub(r" {2,}", "  ", render_provision(result).replace(wt, "<wt>")).splitlines() == [
        f"provision {RUN_ID} (workspace w1): 1 ready, 1 failed",
        "task  state  pane  tab  path  done",
        f"api-pagination  failed  {pane['api-pagination']}  widgets-feat-api-pagination  <wt>/widgets-feat-api-pagination  created worktree, tab",
        f"pagination-docs  ready  {pane['pagination-docs']}  widgets-docs-pagination-guide  <wt>/widgets-docs-pagination-guide  created worktree, tab, agent",
        "api-pagination: agent start failed: herdr agent start: agent_start_failed: agent process exited before becoming interactive",
        "api-pagination: note: no remote: fetch skipped",
        f"api-pagination: note: workspace {herdr_side(engine, 'api-pagination')} closed (by herdr when its pane moved out)",
        "pagination-docs: note: no remote: fetch skipped",
        f"pagination-docs: note: workspace {herdr_side(engine, 'pagination-docs')} closed (by herdr when its pane moved out)",
    ]
    assert herdr.count("agent start") == 2 and [a.name for a in herdr.agent_list()] == ["pagination-docs"]


def test_a_lost_worktree_create_is_settled_by_read_back_and_never_made_twice(tmp_path: Path, git_repo: Any) -> None:
    herdr = FakeHerdr(cwd=git_repo.path, ready_screens=READY_SCREENS)
    engine, run = fake_run(tmp_path, git_repo, herdr, ONE)
    herdr.lose_next("worktree create")  # herdr made the checkout; orch never heard

    first = provision(engine, run)
    before = len(herdr.calls)
    second = provision(engine, engine.ledger.get_run(RUN_ID))

    assert [(w.state, w.already) for w in (*first.workers, *second.workers)] == [("ready", False), ("ready", True)]
    assert herdr.count("worktree create") == 1 and herdr.calls[before:] == []
    assert [t.label for t in herdr.tab_list(workspace="w1")] == ["1", "widgets-feat-api-pagination"]


def test_a_checkout_open_nowhere_is_opened_and_its_pane_moved_into_a_tab_of_the_repo_workspace(tmp_path: Path, git_repo: Any) -> None:
    herdr = FakeHerdr(cwd=git_repo.path, ready_screens=READY_SCREENS)
    engine, run = fake_run(tmp_path, git_repo, herdr, ONE)
    path = tmp_path / "src" / "acme" / "widgets.worktrees" / "widgets-feat-api-pagination"
    git_repo.git("worktree", "add", "--quiet", "-b", "feat/api-pagination", str(path))

    result = provision(engine, run)

    outcome = result.workers[0]
    assert (outcome.state, outcome.pane_id, outcome.reused, outcome.created, outcome.notes) == (
        "ready", "w1:p2", ("worktree",), ("workspace", "tab", "agent"), ("no remote: fetch skipped", "workspace w2 closed (by herdr when its pane moved out)"))
    assert mutations(herdr) == ["worktree open", "pane move", "agent start"]
    assert ("worktree", "open", "--workspace", "w1", "--path", str(path), "--label", "widgets-feat-api-pagination", "--no-focus", "--json") in herdr.argvs()
    assert [(t.tab_id, t.label) for t in herdr.tab_list(workspace="w1")] == [("w1:t1", "1"), ("w1:t2", "widgets-feat-api-pagination")]


def test_a_wrong_tab_label_is_mended_once_before_the_agent_starts(tmp_path: Path, git_repo: Any) -> None:
    herdr = FakeHerdr(cwd=git_repo.path, ready_screens=READY_SCREENS)
    engine, run = fake_run(tmp_path, git_repo, herdr, ONE)
    path = tmp_path / "src" / "acme" / "widgets.worktrees" / "widgets-feat-api-pagination"
    git_repo.git("worktree", "add", "--quiet", "-b", "feat/api-pagination", str(path))
    herdr.tab_create(workspace="w1", cwd=path, label="widgets-pagination")

    result = provision(engine, run)

    assert result.workers[0].notes == ("no remote: fetch skipped", "tab label 'widgets-pagination' mended to 'widgets-feat-api-pagination'")
    assert mutations(herdr) == ["tab rename", "agent start"]
    assert [t.label for t in herdr.tab_list(workspace="w1")] == ["1", "widgets-feat-api-pagination"]


def test_a_layout_path_that_is_not_the_branch_checkout_fails_that_worker_with_gits_words(tmp_path: Path, git_repo: Any) -> None:
    herdr = FakeHerdr(cwd=git_repo.path, ready_screens=READY_SCREENS)
    engine, run = fake_run(tmp_path, git_repo, herdr, TWO)
    path = tmp_path / "src" / "acme" / "widgets.worktrees" / "widgets-docs-pagination-guide"
    path.mkdir(parents=True)
    (path / "notes.txt").write_text("someone's files\n")

    result = provision(engine, run)

    assert [(w.task, w.state) for w in result.workers] == [("api-pagination", "ready"), ("pagination-docs", "failed")]
    assert result.workers[1].error == (  # git's stderr as herdr passes it on, both lines
        "worktree create failed: Preparing worktree (new branch 'docs/pagination-guide')\n"
        f"fatal: '{path}' already exists; {path} is not a checkout of docs/pagination-guide, and orch never retries with another name"
    )
    assert herdr.count("worktree create") == 2 and (path / "notes.txt").read_text() == "someone's files\n"


@pytest.mark.parametrize("existed", [False, True])
def test_provision_records_that_its_checkouts_create_the_worktrees_folder_only_when_it_did_not_exist(tmp_path: Path, git_repo: Any, existed: bool) -> None:
    """Retire removes `<repo>.worktrees/` once empty, and only when this record says the run's checkouts made it."""
    herdr = FakeHerdr(cwd=git_repo.path, ready_screens=READY_SCREENS)
    engine, run = fake_run(tmp_path, git_repo, herdr, ONE)
    folder = tmp_path / "src" / "acme" / "widgets.worktrees"
    if existed:
        folder.mkdir(parents=True)

    provision(engine, run)
    provision(engine, run)

    facts = [e.detail for e in engine.ledger.events(RUN_ID) if e.kind == "worktrees_folder"]
    assert facts == ([] if existed else [{"path": str(folder)}])
    assert folder.is_dir()


# --- a dependant on another host: the integration branch's commit sent to its checkout first ---

# ssh's options skipped, one reachable target whose command string runs as sshd would run it; `down` (a file beside
# the script) refuses every connection, `down-after-push` lets one push land and then takes the host away. Each
# remote command is logged, one per line.
BOX_SSH = """#!/bin/sh
here=$(dirname "$0")
while [ $# -gt 0 ]; do case "$1" in -[BbcDEeFIiJLlmOoPpQRSWw]) shift 2;; -*) shift;; *) break;; esac; done
[ "$1" = me@box ] || { echo "ssh: Could not resolve hostname $1: Name or service not known" >&2; exit 255; }
shift; [ "$1" = -- ] && shift
[ -e "$here/down" ] && { echo "ssh: connect to host box port 22: Connection refused" >&2; exit 255; }
echo "$*" >> "$here/log"
case "$*" in git-receive-pack*) [ -e "$here/down-after-push" ] && { sh -c "$*"; touch "$here/down"; exit 255; };; esac
exec sh -c "$*"
"""

DEPENDANT = """\
organization = "acme"
repo = "widgets"
base = "main"

[integration]
enabled = true
branch = "chore/integration"

[hosts.box]
machine = "box"
ssh = "me@box"
checkout = "{box}"

[[workers]]
task = "core"
objective = "Build the core."
deliverable = "Commits."
branch = "feat/core"
claim = ["src/core/**"]

[[workers]]
task = "ui"
objective = "Build the UI on the core."
deliverable = "Commits."
branch = "feat/ui"
claim = ["src/ui/**"]
host = "box"
after = ["core"]
"""


@pytest.fixture
def box_world(tmp_path: Path, git_repo: Any, monkeypatch: pytest.MonkeyPatch) -> Any:
    """The controller's repository with core accepted and integrated, and the box's clone from before that commit."""
    from types import SimpleNamespace

    box = tmp_path / "box" / "src" / "acme" / "widgets"
    git.run_git(["clone", "--quiet", str(git_repo.path), str(box)])
    git_repo.git("switch", "--quiet", "-c", "chore/integration")
    tip = git_repo.commit("core: the core", {"src/core/core.py": "core = 1\n"})
    git_repo.git("switch", "--quiet", "main")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "ssh").write_text(BOX_SSH)
    (bin_dir / "ssh").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    monkeypatch.setenv("GIT_SSH_COMMAND", str(bin_dir / "ssh"))
    here, there = FakeHerdr(cwd=git_repo.path, ready_screens=READY_SCREENS), FakeHerdr(cwd=box, ready_screens=READY_SCREENS)
    engine, run = fake_run(tmp_path, git_repo, here, DEPENDANT.replace("{box}", str(box)))
    engine.host_herdrs["box"] = there
    ledger = engine.ledger
    for state in (WorkerState.READY, WorkerState.DISPATCHED, WorkerState.WORKING, WorkerState.RESULT, WorkerState.VERIFYING, WorkerState.ACCEPTED):
        ledger.transition(RUN_ID, "core", ledger.get_worker(RUN_ID, "core").state, state, cause={"test": True})
    ledger.update_worker(RUN_ID, "core", integrated_sha=tip)
    return SimpleNamespace(engine=engine, run=run, box=box, tip=tip, herdr=there, bin=bin_dir, ref="refs/orch/w1_p1-20261130T080000Z/base/ui")


def _pushes(box_world: Any) -> int:
    log = box_world.bin / "log"
    return sum(line.startswith("git-receive-pack") for line in log.read_text().splitlines()) if log.exists() else 0


def test_a_dependant_on_another_host_starts_from_the_integration_commit_sent_to_its_checkout_and_read_back_there(box_world: Any) -> None:
    engine, box, tip = box_world.engine, box_world.box, box_world.tip
    assert git.rev_parse(box, tip) is None  # the box's clone predates core's integration

    result = provision(engine, box_world.run)

    ui = next(w for w in result.workers if w.task == "ui")
    assert (ui.state, ui.error, ui.base_sha) == ("ready", None, tip), ui
    assert ui.notes[:2] == (f"starts from chore/integration at {tip[:12]} (after core)", f"sent {tip[:12]} to {box_world.ref} in {box} on host box")
    # Exactly that commit, under orch's own ref there; no branch of the box moved, and the worker's branch starts on it.
    assert git.rev_parse(box, box_world.ref) == tip
    assert git.run_git(["for-each-ref", "--format=%(refname)", "refs/heads"], cwd=box).stdout.split() == ["refs/heads/feat/ui", "refs/heads/main"]
    assert git.rev_parse(box, "refs/heads/feat/ui") == tip
    sent = [(e.key, e.status, e.request) for e in engine.ledger.list_effects(RUN_ID) if e.kind == "base_push"]
    assert sent == [("ui:base_push", "confirmed", {"sha": tip, "ref": box_world.ref, "checkout": str(box), "host": "box"})]
    created = [e.request["base"] for e in engine.ledger.list_effects(RUN_ID) if e.kind == "worktree_create"]
    assert created == [tip] and box_world.herdr.count("worktree create") == 1
    # Again: nothing is sent or made twice.
    provision(engine, box_world.run)
    assert (_pushes(box_world), box_world.herdr.count("worktree create")) == (1, 1)


def test_a_base_push_whose_host_goes_away_after_it_landed_is_settled_by_read_back_never_pushed_twice(box_world: Any) -> None:
    engine = box_world.engine
    (box_world.bin / "down-after-push").touch()

    held = provision(engine, box_world.run)

    # The host gone holds the worker (orchestrator.held), it does not stop the round.
    assert next(w for w in held.workers if w.task == "ui").state == "held"
    # The push landed, the read-back got no answer: in flight, with the unknown outcome journalled; nothing created.
    [effect] = [e for e in engine.ledger.list_effects(RUN_ID) if e.kind == "base_push"]
    assert effect.status == "intended" and box_world.herdr.count("worktree create") == 0
    assert [e.detail["error"] for e in engine.ledger.events(RUN_ID, task_label="ui") if e.kind == "effect_unknown"] == ["HostUnreachable"]
    (box_world.bin / "down-after-push").unlink()
    (box_world.bin / "down").unlink()

    result = provision(engine, box_world.run)

    assert next(w for w in result.workers if w.task == "ui").state == "ready"
    assert [(e.status, e.key) for e in engine.ledger.list_effects(RUN_ID) if e.kind == "base_push"] == [("confirmed", "ui:base_push")]
    settled = [e.detail for e in engine.ledger.events(RUN_ID, task_label="ui") if e.kind == "effect_settled"]
    assert settled == [{"effect_id": effect.id, "kind": "base_push", "key": "ui:base_push", "answer": "done",
                        "how": f"{box_world.ref} in {box_world.box} on host box is {box_world.tip[:12]}"}]
    assert _pushes(box_world) == 1 and git.rev_parse(box_world.box, "refs/heads/feat/ui") == box_world.tip


def test_a_base_push_the_host_refuses_fails_the_dependant_closed_with_gits_words(box_world: Any) -> None:
    hook = box_world.box / ".git" / "hooks" / "pre-receive"
    hook.write_text("#!/bin/sh\necho 'refs are frozen here' >&2\nexit 1\n")
    hook.chmod(0o755)

    result = provision(box_world.engine, box_world.run)

    ui = next(w for w in result.workers if w.task == "ui")
    assert (ui.state, ui.created) == ("failed", ())
    assert ui.error == (
        f"cannot send {box_world.tip[:12]} to {box_world.ref} in {box_world.box} on host box (git push: remote: refs are frozen here / "
        f"To box:{box_world.box} / ! [remote rejected] {box_world.tip} -> {box_world.ref} (pre-receive hook declined) / "
        f"error: failed to push some refs to 'box:{box_world.box}'); {box_world.ref} there is absent; nothing was created"
    )
    assert box_world.herdr.count("worktree create") == 0
