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

Where the checks are re-run is the plan's choice (``verify_on``, per host or per worker). The default is the
controller: the agent had a shell on its host and could have changed its toolchain there, and the integration the
checks vouch for happens on the controller too. ``verify_on = "host"`` spreads that load to the worker's host
(``rerun_on_host``): a scratch checkout of exactly the worker's head commit, made by orch in a fresh temporary folder
there (never the worker's own checkout, which its agent can still touch), each command under ``timeout`` over ssh, the
checkout and folder removed afterwards. A host that stops answering leaves the checks not run, naming it: the worker
is blocked, never accepted, and verified again once it answers.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from orchestrator import git, remote
from orchestrator.checks import CHECK_TIMEOUT_S, CheckRun, run_command_on
from orchestrator.errors import HostUnreachable, one_line
from orchestrator.git import GitError
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


SCRATCH_TEMPLATE = "orch-verify-XXXXXXXX"  # mktemp's: a fresh folder in the host's TMPDIR (else /tmp)


def _not_run(commands: Sequence[str], why: str) -> tuple[CheckRun, ...]:
    return tuple(CheckRun(command=command, exit_code=None, seconds=0.0, output_tail="", error=why) for command in commands)


def rerun_on_host(
    name: str, host: Host, sha: str, commands: Sequence[str], *, runner: remote.Runner = remote.run_process, timeout: float = CHECK_TIMEOUT_S
) -> tuple[CheckRun, ...]:
    """Re-run ``commands`` on the worker's host in a checkout of exactly ``sha`` that orch makes there for them (`git
    worktree add --detach` of the host's checkout, in a fresh ``mktemp -d`` folder), each as ``run_command_on`` does
    (under ``timeout`` there, output kept), and remove the checkout and the folder afterwards.

    A command that could not run there has exit code None and says why, naming the host: the host unreachable (the
    commands after it are not tried), or no checkout of ``sha`` could be made."""
    if not commands:
        return ()
    made = remote.run_remote(host.ssh, ["mktemp", "-d", "-t", SCRATCH_TEMPLATE], runner=runner)
    folder = made.stdout.strip()
    if made.unreachable:
        return _not_run(commands, f"host {name} is unreachable (ssh {host.ssh}: {made.detail()})")
    if made.returncode != 0 or not folder.startswith("/") or "\n" in folder:
        return _not_run(commands, f"no scratch folder on host {name}: {made.detail()}")
    scratch = f"{folder}/checkout"
    runs: list[CheckRun] = []
    try:
        git.add_scratch_worktree(host.checkout, scratch, sha, on=host.ssh)
        for command in commands:
            runs.append(run_command_on(command, ssh=host.ssh, cwd=scratch, timeout=timeout, runner=runner))
    except HostUnreachable as exc:
        return (*runs, *_not_run(commands[len(runs):], f"host {name} is unreachable ({exc.message})"))
    except GitError as exc:
        said = one_line(exc.result.stderr) if exc.result is not None else ""
        return _not_run(commands, f"no checkout of {sha[:12]} could be made on host {name}: {said or exc.message}")
    finally:
        _remove_scratch(host, folder, scratch, runner)
    return tuple(runs)


def _remove_scratch(host: Host, folder: str, scratch: str, runner: remote.Runner) -> None:
    """The scratch checkout and its folder gone from the host (it only held a copy of committed work); a host that
    does not answer keeps them in its temporary folder, where nothing reads them."""
    try:
        git.remove_scratch_worktree(host.checkout, scratch, on=host.ssh)
    except HostUnreachable:
        return
    remote.run_remote(host.ssh, ["rm", "-rf", "--", folder], runner=runner)
