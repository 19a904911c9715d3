"""Evidence at home: a remote worker's commits fetched into the controller's repository by SHA, never by branch name.

A worker on another host commits in a checkout there. Before its result is judged, the controller reads its head back
from that host (``git rev-parse`` of its branch in the host's checkout, over ssh: one SHA, read once) and fetches
exactly that commit into its own repository under a ref of orch's own, ``refs/orch/<run folder>/<task>`` (git over
ssh, ``orchestrator.git.fetch_commit``). Everything after is worked out at home from those objects, as for a local
worker: the commits and changed paths against the claim, the checks re-run in a scratch checkout of the controller,
the merge into the integration branch. No branch of the home repository is created or moved: a name on the worker's
host can change between the read-back and the fetch, a SHA cannot.

The other way, one commit only: a dependant (`after`) on another host starts from the integration branch, which lives
here. Provisioning sends exactly that commit into the host's checkout under orch's ref ``refs/orch/<run folder>/base/
<task>`` (``git push <ssh>:<checkout> SHA:REF``, ``base_ref``) and reads the ref back there before the worktree is made
from it (``orchestrator.provision._send_base``, effect ``base_push``). Nothing is ever pushed to a remote, nor to any
branch.

Decided (issue 26 leaves it open): checks are re-run on the controller, never on the worker's host. The agent had a
shell there and could have changed its toolchain, the controller's re-run is the one that stops a run's processes
cleanly (``orchestrator.checks``), and the integration the checks vouch for happens on the controller too.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from orchestrator import git, remote
from orchestrator.errors import one_line
from orchestrator.locations import run_dir
from orchestrator.reportfiles import Opened

if TYPE_CHECKING:
    from orchestrator.engine import Engine
    from orchestrator.plan import Host
    from registry import Worker

FULL_SHA = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")


def home_ref(run_id: str, task: str) -> str:
    """Where a remote worker's fetched head is kept at home: ``refs/orch/<run folder>/<task>`` (`:` is no ref character)."""
    return f"refs/orch/{run_dir(Path('/'), run_id).name}/{task}"


def base_ref(run_id: str, task: str) -> str:
    """Where a dependant on another host finds the commit it starts from, in that host's checkout:
    ``refs/orch/<run folder>/base/<task>``."""
    return f"refs/orch/{run_dir(Path('/'), run_id).name}/base/{task}"


def ssh_url(host: Host) -> str:
    """The host's checkout as git reaches it over ssh (scp-like ``TARGET:/abs/path``: ssh_config aliases work)."""
    return f"{host.ssh}:{host.checkout}"


@dataclass(frozen=True)
class Fetched:
    """A remote worker's head at home: its SHA and the home ref that holds it; or why it is not there (``problem``)."""

    sha: str | None
    ref: str | None
    problem: str | None = None


def read_back(name: str, host: Host, branch: str, *, runner: remote.Runner = remote.run_process) -> Fetched:
    """The worker's head as its host has it now: the SHA its branch names in the host's checkout (no fetch yet)."""
    found = git.remote_rev_parse(host.ssh, host.checkout, f"refs/heads/{branch}", runner=runner)
    said = found.stdout.strip()
    if found.unreachable:
        return Fetched(None, None, f"host {name} did not answer (ssh {host.ssh}: {found.detail()}); its commits cannot be brought home yet")
    if found.returncode != 0:
        return Fetched(None, None, f"branch {branch} does not exist in {host.checkout} on host {name}")
    if not FULL_SHA.fullmatch(said):
        return Fetched(None, None, f"host {name} answered no commit for {branch}: {one_line(said) or 'nothing'}")
    return Fetched(said, None)


def bring_home(repo: Path | str, run_id: str, task: str, name: str, host: Host, sha: str) -> Fetched:
    """Fetch exactly ``sha`` from the host into ``home_ref``; idempotent (a commit already at home is not fetched again)."""
    if not FULL_SHA.fullmatch(sha):
        return Fetched(None, None, f"{sha!r} is not a full commit SHA")
    ref = home_ref(run_id, task)
    if git.rev_parse(repo, ref) == sha:
        return Fetched(sha, ref)
    done = git.fetch_commit(repo, ssh_url(host), sha, ref)
    if done.returncode != 0:
        return Fetched(None, None, f"cannot fetch {sha[:12]} from host {name}: {one_line(done.stderr) or f'exit {done.returncode}'}")
    if git.rev_parse(repo, ref) != sha:  # what git stored is checked, not what it said
        return Fetched(None, None, f"fetching {sha[:12]} from host {name} left {ref} elsewhere")
    return Fetched(sha, ref)


def open_report_of(engine: Engine, worker: Worker, path: str, *, limit: int | None = None) -> Opened:
    """A report the worker named, read where it was written: on the controller from its pinned roots, or on the
    worker's host by that host's orch (`orch inbox report`: the same reader, its roots resolved there), over ssh."""
    from orchestrator.reportfiles import REPORT_LIMIT_BYTES, named_roots, open_report, pinned_roots
    from registry.kinds import CONTROLLER_HOST

    limit = REPORT_LIMIT_BYTES if limit is None else limit
    folder = engine.run_dir(worker.run_id)
    if worker.host == CONTROLLER_HOST:
        return open_report(path, pinned_roots(folder, worker.task_label, worker.worktree_path), limit=limit)
    from orchestrator.spool import host_orch

    host = engine.host_config(worker.run_id, worker.host)
    roots = [word for root in named_roots(folder, worker.task_label, worker.worktree_path) for word in ("--root", root)]
    answer = remote.run_remote(host.ssh, [*host_orch(host), "inbox", "report", "--limit", str(limit), *roots, "--json", "--", path],
                               runner=engine.remote_runner or remote.run_process)  # fmt: skip
    try:
        said = json.loads(answer.stdout) if answer.returncode == 0 else None
        if isinstance(said, dict) and (isinstance(said.get("text"), str) or isinstance(said.get("reason"), str)):
            return Opened(text=said.get("text"), reason=said.get("reason"))
    except ValueError:
        pass
    return Opened(reason=f"not read on host {worker.host}: {answer.detail()}")


def head_at_home(repo: Path | str, run_id: str, task: str, branch: str, name: str, host: Host, *, runner: remote.Runner = remote.run_process) -> Fetched:
    """Read the worker's head back from its host and fetch that commit home: the one call verification makes."""
    found = read_back(name, host, branch, runner=runner)
    if found.sha is None:
        return found
    return bring_home(repo, run_id, task, name, host, found.sha)
