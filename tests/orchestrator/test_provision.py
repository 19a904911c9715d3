"""Provisioning's pure parts: split direction, the rendering (golden), the fetch gate on real repos, root_pane-less responses."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from orchestrator import git
from orchestrator.herdr_models import LayoutPane, PaneLayoutSnapshot, Rect
from orchestrator.provision import ProvisionResult, SharedRead, WorkerOutcome, _fetch_error, choose_direction, render_provision

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
                branch="feat/api-pagination", created=("worktree", "tab", "agent"), notes=("fetched origin main", "herdr closed the emptied workspace w2")),
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
