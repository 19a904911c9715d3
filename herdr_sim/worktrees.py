"""herdr's worktree commands over real git: sources, default paths, parent workspaces and group membership."""

from __future__ import annotations

import os
import re
import secrets
import subprocess
from pathlib import Path
from typing import Any

from herdr_sim.engine import ApiError, Engine
from herdr_sim.state import Workspace

ADJECTIVES = ("amber", "brisk", "calm", "deft", "eager", "fleet", "gentle", "hardy", "keen", "lucid")
NOUNS = ("otter", "heron", "maple", "cedar", "falcon", "harbor", "meadow", "comet", "river", "summit")


def git(*args: str, cwd: str) -> subprocess.CompletedProcess[str]:
    """Run git in cwd with a timeout; the caller inspects the result."""
    return subprocess.run(["git", "-C", cwd, *args], capture_output=True, text=True, timeout=60)


def slug(branch: str) -> str:
    """Lowercase ASCII alphanumerics, every other run becomes '-', trimmed; empty gives 'worktree'."""
    out = re.sub(r"[^a-z0-9]+", "-", "".join(c.lower() if c.isascii() else "-" for c in branch)).strip("-")
    return out or "worktree"


class Repo:
    """The main checkout a worktree operation starts from."""

    def __init__(self, root: str, source_checkout: str, source_ws: Workspace | None) -> None:
        self.root = root
        self.name = os.path.basename(root)
        self.key = os.path.join(root, ".git")
        self.source_checkout = source_checkout
        self.source_ws = source_ws

    def source(self) -> dict[str, Any]:
        info: dict[str, Any] = {"repo_key": self.key, "repo_name": self.name, "repo_root": self.root,
                                "source_checkout_path": self.source_checkout}
        if self.source_ws is not None:
            info["source_workspace_id"] = self.source_ws.workspace_id
        return info


def _is_linked(path: str) -> bool:
    gd = git("rev-parse", "--path-format=absolute", "--git-dir", cwd=path).stdout.strip()
    cd = git("rev-parse", "--path-format=absolute", "--git-common-dir", cwd=path).stdout.strip()
    return gd != cd


def _main_root(path: str) -> str:
    common = git("rev-parse", "--path-format=absolute", "--git-common-dir", cwd=path).stdout.strip()
    return str(Path(common).parent)


def resolve_source(eng: Engine, workspace: str | None, cwd: str | None, *, allow_linked: bool = False) -> Repo:
    """The repo of --workspace, --cwd, or the active workspace, as herdr resolves it."""
    ws: Workspace | None = None
    if workspace is not None:
        ws = eng.resolve_ws(workspace)
        if ws is None:
            raise ApiError("workspace_not_found", f"workspace {workspace} not found")
        path = ws.worktree["checkout_path"] if ws.worktree else ws.cwd
    elif cwd is not None:
        path = cwd
    elif eng.world.active_workspace_id:
        ws = eng.ws(eng.world.active_workspace_id)
        path = ws.worktree["checkout_path"] if ws.worktree else ws.cwd
    else:
        raise ApiError("invalid_request", "workspace_id or cwd is required when no workspace is active")
    top = git("rev-parse", "--show-toplevel", cwd=path) if Path(path).is_dir() else None
    if top is None or top.returncode != 0:
        raise ApiError("not_git_worktree", f"{path} is not inside a git worktree")
    toplevel = top.stdout.strip()
    if _is_linked(toplevel):
        if not allow_linked:
            raise ApiError("linked_worktree_source", f"{toplevel} is a linked worktree; use its parent repository")
        return Repo(_main_root(toplevel), toplevel, ws)
    return Repo(toplevel, toplevel, ws)


def _membership(repo: Repo, checkout: str, linked: bool) -> dict[str, Any]:
    return {"repo_key": repo.key, "repo_name": repo.name, "repo_root": repo.root, "checkout_path": checkout,
            "is_linked_worktree": linked}


def _open_ws_at(eng: Engine, path: str) -> Workspace | None:
    for ws in eng.world.workspaces:
        if os.path.realpath(ws.cwd) == os.path.realpath(path):
            return ws
    return None


def _parent(eng: Engine, repo: Repo) -> Workspace:
    """The non-linked workspace for the repo root, created unfocused when none is open."""
    parent = repo.source_ws if repo.source_ws is not None and repo.source_ws.group_parent is None else None
    parent = parent or _open_ws_at(eng, repo.root)
    if parent is None:
        parent, _, _ = eng.create_workspace(repo.root, None, {}, False)
    if parent.worktree is None:
        parent.worktree = _membership(repo, repo.root, False)
    return parent


def info(eng: Engine, repo: Repo, path: str, branch: str | None, *, detached: bool = False, bare: bool = False,
         prunable: bool = False) -> dict[str, Any]:
    """WorktreeInfo: label is the repo name, not the workspace label."""
    out: dict[str, Any] = {"path": path}
    if branch:
        out["branch"] = branch
    out.update({"is_bare": bare, "is_detached": detached, "is_prunable": prunable,
                "is_linked_worktree": os.path.realpath(path) != os.path.realpath(repo.root)})
    ws = _open_ws_at(eng, path)
    if ws is not None:
        out["open_workspace_id"] = ws.workspace_id
    out["label"] = repo.name
    return out


def _open(eng: Engine, repo: Repo, path: str, label: str | None, focus: bool) -> tuple[Workspace, bool]:
    parent = _parent(eng, repo)
    existing = _open_ws_at(eng, path)
    if existing is not None:
        ws, already = existing, True
    else:
        ws, _, _ = eng.create_workspace(path, label or os.path.basename(path), {}, focus)
        already = False
    if focus:
        eng.focus_workspace(ws)
    if ws is not parent:
        ws.group_parent = parent.workspace_id
        ws.worktree = _membership(repo, path, True)
    return ws, already


def _created(eng: Engine, ws: Workspace, wt: dict[str, Any]) -> dict[str, Any]:
    tab = eng.tab(ws.tabs[0].tab_id)
    root = eng.world.panes[eng.tab_panes(tab)[0]]
    return {"workspace": eng.workspace_info(ws), "tab": eng.tab_info(tab), "root_pane": eng.pane_info(root),
            "worktree": wt}


def create(eng: Engine, repo: Repo, branch: str | None, base: str | None, path: str | None, label: str | None,
           focus: bool) -> dict[str, Any]:
    """git worktree add, then the parent and the new workspace."""
    if branch is not None and not branch.strip():
        raise ApiError("invalid_request", "branch must not be empty")
    if branch is None:
        branch = f"worktree/{secrets.choice(ADJECTIVES)}-{secrets.choice(NOUNS)}-{secrets.token_hex(2)}"
    if path is None:
        directory = Path(os.environ.get("HOME", "/")) / ".herdr" / "worktrees"
        path = str(directory.absolute() / repo.name / slug(branch))
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    if git("show-ref", "--verify", "--quiet", f"refs/heads/{branch}", cwd=repo.root).returncode == 0:
        proc = git("worktree", "add", path, branch, cwd=repo.root)
    else:
        proc = git("worktree", "add", "-b", branch, path, base or "HEAD", cwd=repo.root)
    if proc.returncode != 0:
        raise ApiError("worktree_create_failed", proc.stderr.strip())
    focus = focus or eng.world.active_workspace_id is None
    ws, _ = _open(eng, repo, path, label, focus)
    return {"type": "worktree_created", **_created(eng, ws, info(eng, repo, path, branch))}


def entries(repo: Repo) -> list[dict[str, Any]]:
    """`git worktree list --porcelain` parsed into path/branch/flags."""
    proc = git("worktree", "list", "--porcelain", cwd=repo.root)
    if proc.returncode != 0:
        raise ApiError("worktree_list_failed", proc.stderr.strip())
    out: list[dict[str, Any]] = []
    for block in proc.stdout.strip().split("\n\n"):
        item: dict[str, Any] = {"branch": None, "detached": False, "bare": False, "prunable": False}
        for line in block.splitlines():
            key, _, value = line.partition(" ")
            if key == "worktree":
                item["path"] = value
            elif key == "branch":
                item["branch"] = value.removeprefix("refs/heads/")
            elif key in ("detached", "bare", "prunable"):
                item[key] = True
        if "path" in item:
            out.append(item)
    return out


def listing(eng: Engine, repo: Repo) -> dict[str, Any]:
    wts = [info(eng, repo, e["path"], e["branch"], detached=e["detached"], bare=e["bare"], prunable=e["prunable"])
           for e in entries(repo)]
    return {"type": "worktree_list", "source": repo.source(), "worktrees": wts}


def open_(eng: Engine, repo: Repo, path: str | None, branch: str | None, label: str | None,
          focus: bool) -> dict[str, Any]:
    matches = [e for e in entries(repo) if (path is not None and os.path.realpath(e["path"]) ==
                                             os.path.realpath(path)) or (branch is not None and e["branch"] == branch)]
    matches = [e for e in matches if not e["bare"] and not e["prunable"]]
    if not matches:
        raise ApiError("worktree_not_found", f"worktree {path or branch} not found")
    if len(matches) > 1:
        raise ApiError("ambiguous_worktree_branch", f"branch {branch} matches more than one worktree")
    entry = matches[0]
    ws, already = _open(eng, repo, entry["path"], label, focus or eng.world.active_workspace_id is None)
    # already_open is a plain bool in herdr's response (src/api/schema/response.rs:75-81): always sent.
    return {"type": "worktree_opened", **_created(eng, ws, info(eng, repo, entry["path"], entry["branch"])),
            "already_open": already}


def remove(eng: Engine, workspace: str, force: bool) -> dict[str, Any]:
    """git worktree remove; a dirty checkout needs --force; the parent gets focus afterwards."""
    ws = eng.resolve_ws(workspace)
    if ws is None:
        raise ApiError("workspace_not_found", f"workspace {workspace} not found")
    if ws.group_parent is None or not ws.worktree:
        raise ApiError("not_linked_worktree", f"workspace {ws.workspace_id} is not a linked worktree")
    path = ws.worktree["checkout_path"]
    root = ws.worktree["repo_root"]
    if force:
        for pid in eng.ws_panes(ws):
            eng.tmux.kill_pane(eng.world.panes[pid].tmux)
    proc = git("worktree", "remove", *(["--force"] if force else []), path, cwd=root)
    if proc.returncode != 0:
        message = proc.stderr.strip()
        if "modified or untracked" in message or "use --force" in message:
            raise ApiError("dirty_worktree_requires_force", message)
        raise ApiError("worktree_remove_failed", message)
    parent_id = ws.group_parent
    eng.close_workspace(ws, cascade=False)
    parent = next((w for w in eng.world.workspaces if w.workspace_id == parent_id), None)
    if parent is not None:
        eng.focus_workspace(parent)
    return {"type": "worktree_removed", "workspace_id": ws.workspace_id, "path": path, "forced": force}
