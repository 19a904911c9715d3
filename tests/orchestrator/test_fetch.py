"""Evidence at home (`orchestrator.fetch`): a remote worker's head read back on its host and fetched home by SHA.

Two real repositories: the controller's, and the worker host's clone. For git, ssh is a stand-in that execs the
remote command string through `sh -c` (stdin and stdout stay the pipe git's protocol talks over) for the one target
`me@box`; the read-back goes through the local runner at orch's one ssh seam (`orchestrator.remote.Runner`).
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path

import pytest

from orchestrator import fetch
from orchestrator.plan import Host

BRANCH = "feat/api-pagination"
# ssh's options skipped, one reachable target, its command string run as sshd would (exit 255 for any other target).
SSH = """#!/bin/sh
while [ $# -gt 0 ]; do case "$1" in -[BbcDEeFIiJLlmOoPpQRSWw]) shift 2;; -*) shift;; *) break;; esac; done
[ "$1" = me@box ] || { echo "ssh: Could not resolve hostname $1: Name or service not known" >&2; exit 255; }
shift; [ "$1" = -- ] && shift
exec sh -c "$*"
"""


def _local(env: Mapping[str, str]):  # type: ignore[no-untyped-def]
    def runner(argv: Sequence[str], *, env_: Mapping[str, str] | None = None, **kw: object) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(["sh", "-c", argv[-1]], env=dict(env), capture_output=True, text=True, timeout=60)
        return subprocess.CompletedProcess(list(argv), done.returncode, done.stdout, done.stderr)

    return runner


@pytest.fixture
def box(tmp_path: Path, git_repo_factory, monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    home = git_repo_factory(tmp_path / "home" / "widgets")
    checkout = tmp_path / "box" / "widgets"
    subprocess.run(["git", "clone", "--quiet", str(home.path), str(checkout)], check=True, timeout=60)
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path / "box")}
    (tmp_path / "bin").mkdir()
    ssh = tmp_path / "bin" / "ssh"
    ssh.write_text(SSH)
    ssh.chmod(0o755)
    monkeypatch.setenv("GIT_SSH_COMMAND", str(ssh))
    work = home.__class__(checkout)
    work.git("switch", "--quiet", "-c", BRANCH)
    head = work.commit("feat: pages", {"src/api/pages.py": "x = 1\n"})
    host = Host(machine="box", ssh="me@box", checkout=str(checkout))
    return home, work, host, head, _local(env)


def test_the_head_is_read_back_and_fetched_home_by_sha_under_orchs_own_ref(box) -> None:  # type: ignore[no-untyped-def]
    home, work, host, head, runner = box
    run_id = "w1:p1-20261202T070000Z"

    found = fetch.head_at_home(home.path, run_id, "api-pagination", BRANCH, "box", host, runner=runner)

    assert found == fetch.Fetched(head, "refs/orch/w1_p1-20261202T070000Z/api-pagination")
    assert home.git("rev-parse", "refs/orch/w1_p1-20261202T070000Z/api-pagination") == head
    assert home.git("for-each-ref", "--format=%(refname)", "refs/heads") == "refs/heads/main"  # no branch made or moved
    # Again: already home, nothing fetched; a later commit on the box is fetched by its own SHA.
    assert fetch.bring_home(home.path, run_id, "api-pagination", "box", host, head) == found
    later = work.commit("feat: more", {"src/api/more.py": "y = 2\n"})
    assert fetch.head_at_home(home.path, run_id, "api-pagination", BRANCH, "box", host, runner=runner).sha == later


def test_an_unadvertised_commit_is_fetched_by_its_sha(box) -> None:  # type: ignore[no-untyped-def]
    # The branch moved on after the read-back (a commit no ref names any more): the SHA read is still the one fetched.
    home, work, host, head, _runner = box
    work.git("reset", "--quiet", "--hard", "HEAD~1")

    found = fetch.bring_home(home.path, "r", "t", "box", host, head)

    assert (found.sha, found.problem) == (head, None)
    assert home.git("cat-file", "-t", head) == "commit"


def test_what_cannot_be_brought_home_is_one_reason(box) -> None:  # type: ignore[no-untyped-def]
    home, _work, host, _head, runner = box
    assert fetch.head_at_home(home.path, "r", "t", "feat/none", "box", host, runner=runner) == fetch.Fetched(
        None, None, f"branch feat/none does not exist in {host.checkout} on host box"
    )
    assert fetch.bring_home(home.path, "r", "t", "box", host, "--upload-pack=touch /tmp/x") == fetch.Fetched(
        None, None, "'--upload-pack=touch /tmp/x' is not a full commit SHA"
    )
    missing = "0" * 40
    found = fetch.bring_home(home.path, "r", "t", "box", host, missing)
    assert found.sha is None and found.problem is not None and found.problem.startswith("cannot fetch 000000000000 from host box: ")
    gone = Host(machine="box", ssh="me@nowhere", checkout=host.checkout)
    found = fetch.bring_home(home.path, "r", "t", "box", gone, "1" * 40)
    assert found.problem is not None and "Could not resolve hostname me@nowhere" in found.problem


def test_a_superseded_remote_worker_names_the_head_fetched_home_never_a_branch_of_that_name_here(box, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    from orchestrator.config import Settings
    from orchestrator.engine import Engine
    from orchestrator.verify import supersede
    from registry import WorkerState as S

    home, _work, host, head, _runner = box
    other = home.commit("chore: elsewhere")  # a branch of the same name at home, pointing at something else
    home.git("branch", BRANCH, other)
    settings = Settings(home=tmp_path, orch_home=tmp_path / "orch", policy_dir=tmp_path / "p", src_root=tmp_path / "src")
    engine = Engine(settings=settings, herdr=None, env={})  # type: ignore[arg-type]
    run_id = "w1:p1-20261202T070000Z"
    run = engine.ledger.create_run(run_id, controller_target="w1:p1", repo_path=home.path)
    for task in ("one", "two"):
        engine.ledger.add_worker(run_id, task, name=task, kind="codex", objective="x", branch=BRANCH, host="box")
        engine.ledger.transition(run_id, task, S.PROVISIONING, S.READY)
        engine.ledger.transition(run_id, task, S.READY, S.DISPATCHED)
    fetch.bring_home(home.path, run_id, "one", "box", host, head)
    try:
        fetched = supersede(engine, run, "one", "replaced")
        never = supersede(engine, run, "two", "replaced")
    finally:
        engine.close()
    assert [v.verification.head_sha for v in fetched.verdicts] == [head]
    assert [v.verification.head_sha for v in never.verdicts] == [None]


# --- checks re-run on the worker's host (verify_on = "host") ---------------------------------------------------------

# The same stand-in as `ssh` on PATH (orch's own ssh calls: git on the host, mktemp, the checks), unreachable while the
# file DOWN exists (a host gone in the middle of verification).
SSH_ON_PATH = """#!/bin/sh
[ -e "$ORCH_TEST_DOWN" ] && { echo "ssh: connect to host me@box port 22: Connection refused" >&2; exit 255; }
""" + SSH.removeprefix("#!/bin/sh\n")


@pytest.fixture
def on_box(box, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    """The box, reached by orch's own `ssh` (the stand-in, first on PATH), its temporary folder a folder of this test."""
    home, work, host, head, _runner = box
    (tmp_path / "path").mkdir()
    ssh = tmp_path / "path" / "ssh"
    ssh.write_text(SSH_ON_PATH)
    ssh.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path / 'path'}:{os.environ['PATH']}")
    monkeypatch.setenv("TMPDIR", str(tmp_path / "box-tmp"))
    monkeypatch.setenv("ORCH_TEST_DOWN", str(tmp_path / "down"))
    (tmp_path / "box-tmp").mkdir()
    return work, host, head, tmp_path


def test_checks_rerun_on_the_host_in_a_fresh_checkout_of_the_head_that_is_removed_after(on_box) -> None:  # type: ignore[no-untyped-def]
    work, host, head, tmp_path = on_box
    (work.path / "src" / "api" / "pages.py").write_text("broken by the agent after its result\n")  # the live checkout

    runs = fetch.rerun_on_host("box", host, head, [
        'test "$(cat src/api/pages.py)" = "x = 1" && git rev-parse HEAD && pwd',  # exactly the head, not the live tree
        "echo out; echo err >&2; exit 3",
        "exit 255",  # the command's own 255 is no lost link (ssh exits 255 too)
    ])  # fmt: skip

    scratch = runs[0].output_tail.splitlines()[-1]
    assert [(r.exit_code, r.error) for r in runs] == [(0, None), (3, None), (255, None)]
    assert (runs[0].output_tail, runs[1].output_tail, runs[2].output_tail) == (f"{head}\n{scratch}", "out\nerr", "")
    assert scratch.startswith(f"{tmp_path / 'box-tmp'}/orch-verify-") and scratch.endswith("/checkout")
    assert list((tmp_path / "box-tmp").iterdir()) == []  # the checkout and its folder are gone
    assert work.git("worktree", "list", "--porcelain").count("worktree ") == 1
    assert (work.path / "src" / "api" / "pages.py").read_text() == "broken by the agent after its result\n"


def test_a_host_gone_during_its_checks_leaves_them_not_run_naming_it(on_box) -> None:  # type: ignore[no-untyped-def]
    work, host, head, tmp_path = on_box
    down = tmp_path / "down"

    runs = fetch.rerun_on_host("box", host, head, [f"touch {down}", "true", "make"])

    gone = "host box is unreachable (ssh me@box true: ssh failed: ssh: connect to host me@box port 22: Connection refused)"
    assert [(r.command, r.exit_code, r.error) for r in runs] == [(f"touch {down}", 0, None), ("true", None, gone), ("make", None, gone)]

    # Gone from the start: nothing runs, each check says why.
    runs = fetch.rerun_on_host("box", host, head, ["true"])
    assert [(r.exit_code, r.error) for r in runs] == [
        (None, "host box is unreachable (ssh me@box: ssh: connect to host me@box port 22: Connection refused)"),
    ]


def test_a_check_out_of_time_on_the_host_and_a_head_it_lacks_are_not_run_and_say_why(on_box) -> None:  # type: ignore[no-untyped-def]
    work, host, head, tmp_path = on_box
    (slow,) = fetch.rerun_on_host("box", host, head, ["echo started; exec sleep 30"], timeout=0.5)
    assert (slow.exit_code, slow.output_tail, slow.error) == (None, "started", "timed out after 0.5s")

    (lacking,) = fetch.rerun_on_host("box", host, "1" * 40, ["true"])
    assert (lacking.exit_code, lacking.error) == (None, f"no checkout of 111111111111 could be made on host box: fatal: invalid reference: {'1' * 40}")
    assert list((tmp_path / "box-tmp").iterdir()) == []
