"""The one module that runs git for the orchestrator: argv lists, timeouts, failures that carry argv and output."""

from __future__ import annotations

import os
import shlex
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from orchestrator import crash_seam, remote
from orchestrator.children import run_child
from orchestrator.errors import HostUnreachable, OrchError, one_line

GIT_TIMEOUT_S = 120.0


@dataclass(frozen=True)
class GitResult:
    """One finished git process."""

    argv: tuple[str, ...]
    returncode: int
    stdout: str
    stderr: str
    seconds: float = 0.0


# Callables told of every finished git call (the run's log); process-wide because run_git is called from everywhere.
_observers: list[Callable[[GitResult], None]] = []


def observe(callback: Callable[[GitResult], None]) -> Callable[[], None]:
    """Tell ``callback`` of every git call from now on; returns the function that stops it."""
    _observers.append(callback)

    def stop() -> None:
        if callback in _observers:
            _observers.remove(callback)

    return stop


def _told(result: GitResult) -> GitResult:
    for callback in list(_observers):
        callback(result)
    return result


class GitError(OrchError):
    """git exited non-zero, timed out or is missing; carries the whole call for the log."""

    def __init__(self, message: str, result: GitResult | None = None) -> None:
        super().__init__(message)
        self.result = result


def command_text(argv: tuple[str, ...] | list[str]) -> str:
    """A git argv as one readable line: an argument holding whitespace is quoted, a line break shown as ``\\n``.

    A merge's ``-m`` message spans lines; printed raw it split an error into `orch:` lines of argv fragments.
    """
    return " ".join(shlex.quote(arg.replace("\n", "\\n")) if not arg or any(c.isspace() for c in arg) else arg for arg in argv)


def run_git(args: list[str], *, cwd: Path | str | None = None, check: bool = True, timeout: float = GIT_TIMEOUT_S, on: str | None = None) -> GitResult:
    """Run ``git <args>``; with ``check`` a non-zero exit raises GitError carrying git's stderr.

    ``on``: an ssh target; git then runs on that host (``ssh … TARGET -- 'git -C CWD …'``, orchestrator.remote), and
    ssh's own failure (exit 255: the host is gone or the link dropped) raises HostUnreachable, never a git verdict.
    """
    local = ("git", *args) if cwd is None else ("git", "-C", str(cwd), *args)
    argv = local if on is None else tuple(remote.ssh_argv(on, local))
    started = time.monotonic()
    try:
        # Like herdr's, a git call outlives a terminal's Ctrl-C: killed halfway, `git worktree add` or a merge would be
        # left half done, and a read such as `rev-parse --verify` would answer "no such commit" for the whole run.
        # On another host, the crash matrix may stop orch around it (a remote checkout's removal among them).
        if on is None:
            proc = run_child(argv, env=os.environ, timeout=timeout)
        else:
            proc = crash_seam.around(argv, lambda: run_child(argv, env=os.environ, timeout=timeout))
    except FileNotFoundError as exc:
        _told(GitResult(argv, 127, "", str(exc), time.monotonic() - started))
        raise GitError("git is not installed or not on PATH") from exc
    except subprocess.TimeoutExpired as exc:
        _told(GitResult(argv, -1, "", f"timed out after {timeout:g}s", time.monotonic() - started))
        raise GitError(f"git timed out after {timeout:g}s: {command_text(argv)}") from exc
    result = _told(GitResult(argv, proc.returncode, proc.stdout, proc.stderr, time.monotonic() - started))
    if on is not None and proc.returncode == remote.SSH_FAILED:
        raise HostUnreachable(f"ssh {on} {command_text(local)}: ssh failed: {one_line(proc.stderr) or 'no output'}",
                              hint=f"orch needs `ssh -o BatchMode=yes {on} true` to work without a prompt")
    if check and proc.returncode != 0:
        detail = proc.stderr.strip() or proc.stdout.strip() or f"exit {proc.returncode}"
        raise GitError(f"{command_text(argv)} failed: {one_line(detail)}", result)
    return result


def rev_parse(repo: Path | str, rev: str, *, on: str | None = None) -> str | None:
    """The full SHA that ``rev`` names in ``repo``, or None when it names no commit (``on``: that host's ``repo``)."""
    result = run_git(["rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}"], cwd=repo, check=False, on=on)
    return result.stdout.strip() if result.returncode == 0 else None


def remote_rev_parse(target: str, checkout: str, rev: str, *, runner: remote.Runner = remote.run_process) -> remote.RemoteResult:
    """``git -C CHECKOUT rev-parse --verify --quiet REV^{commit}`` on another host over ssh: exit 0 prints the SHA, 1
    means the checkout lacks it, 128 that CHECKOUT is no git checkout, 255 that ssh failed."""
    return remote.run_remote(target, ["git", "-C", checkout, "rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}"], runner=runner)


def commits_between(repo: Path | str, base: str, head: str, *, on: str | None = None) -> list[str]:
    """SHAs reachable from ``head`` but not from ``base``, oldest first."""
    out = run_git(["rev-list", "--reverse", f"{base}..{head}"], cwd=repo, on=on).stdout
    return out.split()


def changed_paths(repo: Path | str, base: str, head: str) -> list[str]:
    """Paths that differ between two commits (renames count as delete + add)."""
    out = run_git(["diff", "--name-only", "--no-renames", "-z", base, head], cwd=repo).stdout
    return sorted(p for p in out.split("\0") if p)


def trailer_values(repo: Path | str, sha: str, key: str, *, on: str | None = None) -> list[str]:
    """The values of trailer ``key`` in one commit's message (git's own trailer parser), in order."""
    out = run_git(["log", "-1", f"--format=%(trailers:key={key},valueonly,separator=%x00)", sha], cwd=repo, on=on).stdout
    return [value.strip() for value in out.strip("\n").split("\0") if value.strip()]


def commit_paths(repo: Path | str, sha: str) -> list[str]:
    """Paths one commit changed against its first parent (every path of a root commit)."""
    out = run_git(["diff-tree", "--no-commit-id", "--name-only", "--no-renames", "-r", "-z", "--root", "-m", "--first-parent", sha], cwd=repo).stdout
    return sorted({p for p in out.split("\0") if p})


def path_exists_at(repo: Path | str, rev: str, path: str) -> bool:
    """True when ``path`` exists in the tree of commit ``rev``."""
    return run_git(["cat-file", "-e", f"{rev}:{path}"], cwd=repo, check=False).returncode == 0


def status_porcelain(checkout: Path | str, *, on: str | None = None) -> list[str]:
    """``git status --porcelain`` lines (untracked files included): empty means clean."""
    out = run_git(["status", "--porcelain", "--untracked-files=all"], cwd=checkout, on=on).stdout
    return [line for line in out.splitlines() if line]


def current_branch(checkout: Path | str, *, on: str | None = None) -> str:
    """``git rev-parse --abbrev-ref HEAD`` ("HEAD" when detached)."""
    return run_git(["rev-parse", "--abbrev-ref", "HEAD"], cwd=checkout, on=on).stdout.strip()


def toplevel(checkout: Path | str, *, on: str | None = None) -> str:
    """``git rev-parse --show-toplevel``."""
    return run_git(["rev-parse", "--show-toplevel"], cwd=checkout, on=on).stdout.strip()


def add_scratch_worktree(repo: Path | str, path: Path | str, rev: str, *, on: str | None = None) -> None:
    """A detached checkout of ``rev`` at ``path``, for running checks without touching a live worker (``on``: that host's)."""
    run_git(["worktree", "add", "--detach", "--quiet", str(path), rev], cwd=repo, on=on)


def remove_scratch_worktree(repo: Path | str, path: Path | str, *, on: str | None = None) -> None:
    """Remove a scratch checkout this process created (it only ever holds a copy of committed work)."""
    run_git(["worktree", "remove", "--force", str(path)], cwd=repo, check=False, on=on)
    run_git(["worktree", "prune"], cwd=repo, check=False, on=on)


def commits_only_on(repo: Path | str, head: str, branch: str | None, *, on: str | None = None) -> list[str]:
    """Commits reachable from ``head`` but from no branch, tag or remote-tracking ref other than ``branch``, newest first.

    These are the commits a checkout holds that exist nowhere else (its own branch aside); an empty list means
    every commit of the checkout is also on some other ref (merged, integrated or pushed).
    """
    # --exclude applies to the next --branches only, and branch names cannot contain glob characters.
    args = ["rev-list", head, "--not", *([f"--exclude={branch}"] if branch else []), "--branches", "--tags", "--remotes"]
    return run_git(args, cwd=repo, on=on).stdout.split()


def held_by_a_ref(repo: Path | str, sha: str) -> bool:
    """Whether ``repo`` has commit ``sha`` and some ref of it (any: branch, tag, remote-tracking, orch's own
    ``refs/orch/…``) reaches it, so the commit cannot be lost there."""
    found = run_git(["for-each-ref", "--contains", sha, "--count=1", "--format=%(refname)"], cwd=repo, check=False)
    return found.returncode == 0 and bool(found.stdout.strip())


def worktree_checkouts(repo: Path | str, *, on: str | None = None) -> list[str]:
    """Paths of the repo's checkouts from ``git worktree list --porcelain``; the main checkout comes first."""
    out = run_git(["worktree", "list", "--porcelain"], cwd=repo, on=on).stdout
    return [line.removeprefix("worktree ") for line in out.splitlines() if line.startswith("worktree ")]


def remove_worktree(repo: Path | str, path: Path | str, *, on: str | None = None) -> None:
    """``git worktree remove <path>`` without ``--force``: git itself refuses a dirty or locked checkout."""
    run_git(["worktree", "remove", str(path)], cwd=repo, on=on)


# --- provisioning: remotes and the fetch gate (orchestrator.provision) ---

# Words git and its transports print when a fetch failed for lack of credentials or access, not for a bad ref.
AUTH_FAILURE_MARKERS: tuple[str, ...] = (
    "Permission denied (publickey",
    "Authentication failed",
    "could not read Username",
    "could not read Password",
    "terminal prompts disabled",
    "Host key verification failed",
    "HTTP Basic: Access denied",
    "The requested URL returned error: 403",
    "The requested URL returned error: 401",
)


def remotes(repo: Path | str) -> list[str]:
    """The repository's remote names (``git remote``), empty when it has none."""
    return run_git(["remote"], cwd=repo).stdout.split()


def upstream_of(repo: Path | str, ref: str) -> str | None:
    """The upstream (``origin/main``) of a local branch, or None when it has none."""
    result = run_git(["rev-parse", "--abbrev-ref", "--symbolic-full-name", f"{ref}@{{upstream}}"], cwd=repo, check=False)
    return result.stdout.strip() or None if result.returncode == 0 else None


def fetch_branch(repo: Path | str, remote: str, branch: str, *, timeout: float = GIT_TIMEOUT_S) -> GitResult:
    """``git fetch <remote> <branch>`` that never waits for a password: a prompt becomes a failure (check the result)."""
    return _fetch(repo, (remote, branch), ssh="ssh -o BatchMode=yes", timeout=timeout)


def _fetch(repo: Path | str, args: tuple[str, ...], *, ssh: str, timeout: float, verb: str = "fetch") -> GitResult:
    """``git -C repo fetch --quiet ARGS`` (or ``push``) with no prompt ever (``ssh`` unless GIT_SSH_COMMAND is set); check the result."""
    # The controller runs in a terminal, so git would otherwise ask for credentials on /dev/tty and hang the run.
    env = {**os.environ, "GIT_TERMINAL_PROMPT": "0", "GIT_SSH_COMMAND": os.environ.get("GIT_SSH_COMMAND", ssh)}
    argv = ("git", "-C", str(repo), verb, "--quiet", *args)
    started = time.monotonic()
    try:
        # To or from another host (a worker's commit fetched by its SHA, a base pushed): the crash matrix may stop orch around it.
        proc = crash_seam.around(argv, lambda: run_child(argv, env=env, timeout=timeout))
    except FileNotFoundError as exc:
        _told(GitResult(argv, 127, "", str(exc), time.monotonic() - started))
        raise GitError("git is not installed or not on PATH") from exc
    except subprocess.TimeoutExpired:
        return _told(GitResult(argv, -1, "", f"git fetch timed out after {timeout:g}s", time.monotonic() - started))
    return _told(GitResult(argv, proc.returncode, proc.stdout, proc.stderr, time.monotonic() - started))


# The worker host's upload-pack is asked to serve a commit by its SHA, whatever protocol version ssh lets through
# (sshd passes GIT_PROTOCOL only when configured to: without it, protocol v0 refuses a SHA no ref advertises).
_UPLOAD_PACK_BY_SHA = "git -c uploadpack.allowAnySHA1InWant=true upload-pack"


def fetch_commit(repo: Path | str, url: str, sha: str, ref: str, *, timeout: float = GIT_TIMEOUT_S) -> GitResult:
    """``git fetch URL SHA`` into ``ref`` of ``repo``: exactly that commit (and its history), whatever any remote branch
    is called or now points at; never prompts (BatchMode ssh, no terminal prompt). Check the result."""
    # `--end-of-options` ends git's options: neither URL nor refspec is ever read as one; `+SHA:REF` only ever creates
    # or moves orch's own ref, never a branch.
    args = ("--no-tags", "--no-write-fetch-head", f"--upload-pack={_UPLOAD_PACK_BY_SHA}", "--end-of-options", url, f"+{sha}:{ref}")
    return _fetch(repo, args, ssh="ssh -o BatchMode=yes -o ConnectTimeout=10", timeout=timeout)


def push_commit(repo: Path | str, url: str, sha: str, ref: str, *, timeout: float = GIT_TIMEOUT_S) -> GitResult:
    """``git push URL +SHA:REF``: exactly that commit (and what it needs) into ``ref`` of the checkout at ``URL``, an
    orch ref there (``refs/orch/…``), never a branch and never a shared remote; never prompts. Check the result."""
    # --no-verify: no pre-push hook of the person's runs for it (it hands a base to one of the run's own checkouts,
    # it publishes nothing); `--end-of-options` ends git's options, as for fetch_commit.
    assert ref.startswith("refs/orch/"), ref  # orch's own refs only, never a branch
    args = ("--no-verify", "--end-of-options", url, f"+{sha}:{ref}")
    return _fetch(repo, args, ssh="ssh -o BatchMode=yes -o ConnectTimeout=10", timeout=timeout, verb="push")


def missing_remote_ref(stderr: str) -> bool:
    """Whether a failed fetch only said the branch does not exist on the remote (a new target branch)."""
    return "couldn't find remote ref" in stderr


def is_auth_failure(stderr: str) -> bool:
    """Whether a failed fetch's stderr says it lacked credentials or access."""
    return any(marker in stderr for marker in AUTH_FAILURE_MARKERS)


def branch_exists(repo: Path | str, branch: str, *, on: str | None = None) -> bool:
    """True when the local branch ``branch`` exists."""
    return rev_parse(repo, f"refs/heads/{branch}", on=on) is not None


def is_ancestor(repo: Path | str, sha: str, rev: str, *, on: str | None = None) -> bool:
    """``git merge-base --is-ancestor``: True when ``sha`` is reachable from ``rev`` (exit 1 means no; others fail)."""
    result = run_git(["merge-base", "--is-ancestor", sha, rev], cwd=repo, check=False, on=on)
    if result.returncode not in (0, 1):
        detail = result.stderr.strip() or f"exit {result.returncode}"
        raise GitError(f"{command_text(result.argv)} failed: {one_line(detail)}", result)
    return result.returncode == 0


def worktree_paths(repo: Path | str) -> dict[str, str | None]:
    """Every worktree of ``repo``: path -> checked-out branch name (None when detached or bare)."""
    out = run_git(["worktree", "list", "--porcelain"], cwd=repo).stdout
    found: dict[str, str | None] = {}
    path: str | None = None
    for line in out.splitlines():
        if line.startswith("worktree "):
            path = line[len("worktree ") :]
            found[path] = None
        elif line.startswith("branch refs/heads/") and path is not None:
            found[path] = line[len("branch refs/heads/") :]
    return found


def add_branch_worktree(repo: Path | str, path: Path | str, branch: str, start: str | None = None) -> None:
    """Check ``branch`` out at ``path``; with ``start`` the branch is created there first (``worktree add -b``)."""
    args = ["worktree", "add", "--quiet", "-b", branch, str(path), start] if start else ["worktree", "add", "--quiet", str(path), branch]
    run_git(args, cwd=repo)


def merge_no_ff(checkout: Path | str, rev: str, message: str) -> GitResult:
    """``git merge --no-ff`` of ``rev`` into the checkout's branch; not checked (a conflict is an answer, not a crash)."""
    return run_git(["merge", "--no-ff", "--no-edit", "-m", message, rev], cwd=checkout, check=False)


def unmerged_paths(checkout: Path | str) -> list[str]:
    """Paths left conflicted by a merge in progress."""
    out = run_git(["diff", "--name-only", "--diff-filter=U", "-z"], cwd=checkout).stdout
    return sorted(p for p in out.split("\0") if p)


def merge_in_progress(checkout: Path | str) -> bool:
    """True when the checkout has a merge to conclude or abort (MERGE_HEAD exists)."""
    return rev_parse(checkout, "MERGE_HEAD") is not None


def merge_abort(checkout: Path | str) -> None:
    """``git merge --abort``: put the checkout back as it was before the merge."""
    run_git(["merge", "--abort"], cwd=checkout)
