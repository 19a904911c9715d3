"""Server-side semantics of the simulated herdr: ids, focus, agent state, layout, close cascades, JSON shapes."""

from __future__ import annotations

import os
import re
import subprocess
import time
from pathlib import Path
from typing import Any

from herdr_sim import detect, procs, versions
from herdr_sim.errors import ApiError
from herdr_sim.ids import PANE_RE, b32
from herdr_sim.paths import Paths
from herdr_sim.state import Pane, Tab, World, Workspace
from herdr_sim.tmux import Tmux, TmuxError

AREA = {"x": 0, "y": 0, "width": 200, "height": 50}
SCROLL = {"offset_from_bottom": 0, "max_offset_from_bottom": 0, "viewport_rows": 24}
RESERVED_SOURCES = {f"herdr:{k}": k for k in ("claude", "codex", "copilot", "devin", "droid", "qodercli", "cursor")}
# 0.9.5 row 12 (0.9.2): inherited Claude Code, Codex and terminal session markers a new pane no longer gets (the
# release notes name the kinds, not the variables: these are the ones those programs set).
SESSION_MARKERS = ("CLAUDECODE", "CLAUDE_CODE_ENTRYPOINT", "CODEX_SANDBOX", "CODEX_THREAD_ID", "TERM_SESSION_ID",
                   "ITERM_SESSION_ID", "WT_SESSION", "KITTY_WINDOW_ID", "WEZTERM_PANE")
RANK = {"blocked": 4, "done": 3, "working": 2, "idle": 1, "unknown": 0}


def git_toplevel(cwd: str) -> str | None:
    """The git work tree root containing cwd, or None."""
    try:
        proc = subprocess.run(["git", "-C", cwd, "rev-parse", "--show-toplevel"], capture_output=True,
                              text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return proc.stdout.strip() if proc.returncode == 0 else None


class Engine:
    """Applies one request to the World; the caller holds the store lock."""

    def __init__(self, paths: Paths, world: World, now: float | None = None) -> None:
        self.paths = paths
        self.world = world
        self.profile = versions.current()
        self.tmux = Tmux(paths.tmux_socket, self.profile.width, self.profile.height)
        self.now = time.time() if now is None else now

    # ---- lookup -------------------------------------------------------------------------------

    def ws(self, workspace_id: str) -> Workspace:
        for ws in self.world.workspaces:
            if ws.workspace_id == workspace_id:
                return ws
        raise KeyError(workspace_id)

    def resolve_ws(self, raw: str) -> Workspace | None:
        """Exact id, or `w_<n>` / bare `<n>` as a 1-based position."""
        for ws in self.world.workspaces:
            if ws.workspace_id == raw:
                return ws
        m = re.fullmatch(r"(?:w_)?(\d+)", raw)
        if m and 1 <= int(m.group(1)) <= len(self.world.workspaces):
            return self.world.workspaces[int(m.group(1)) - 1]
        return None

    def tab(self, tab_id: str) -> Tab:
        ws = self.ws(tab_id.split(":")[0])
        for tab in ws.tabs:
            if tab.tab_id == tab_id:
                return tab
        raise KeyError(tab_id)

    def resolve_tab(self, raw: str) -> Tab | None:
        """Exact `wX:tN`, `<ws>:<n>` (position) or `t_<ws>_<n>`."""
        m = re.fullmatch(r"t_([^_]+)_(\d+)", raw)
        if m:
            raw = f"{m.group(1)}:{m.group(2)}"
        if ":" not in raw:
            return None
        ws_raw, rest = raw.split(":", 1)
        ws = self.resolve_ws(ws_raw)
        if ws is None:
            return None
        for tab in ws.tabs:
            if tab.tab_id == f"{ws.workspace_id}:{rest}":
                return tab
        if rest.isdigit() and 1 <= int(rest) <= len(ws.tabs):
            return ws.tabs[int(rest) - 1]
        return None

    def resolve_pane(self, raw: str) -> Pane | None:
        """Exact id, an alias left by a cross-workspace move, `<ws>-<n>`, or `p_<ws>_<n>`."""
        if raw in self.world.panes:
            return self.world.panes[raw]
        for pane in self.world.panes.values():
            if raw in pane.aliases:
                return pane
        m = re.fullmatch(r"(?:p_)?([^_\-:]+)[-_]([1-9A-Z0]+)", raw)
        if m:
            ws = self.resolve_ws(m.group(1))
            if ws is not None:
                return self.world.panes.get(f"{ws.workspace_id}:p{m.group(2)}")
        return None

    def tab_of(self, pane: Pane) -> Tab:
        return self.tab(pane.tab_id)

    def tab_panes(self, tab: Tab) -> list[str]:
        return leaves(tab.layout)

    def ws_panes(self, ws: Workspace) -> list[str]:
        return [p for tab in ws.tabs for p in self.tab_panes(tab)]

    # ---- focus and status ---------------------------------------------------------------------

    def in_active_tab(self, pane: Pane) -> bool:
        ws = self.ws(pane.workspace_id)
        return self.world.active_workspace_id == ws.workspace_id and ws.active_tab_id == pane.tab_id

    def pane_focused(self, pane: Pane) -> bool:
        return self.in_active_tab(pane) and self.tab_of(pane).focused_pane_id == pane.pane_id

    def effective_label(self, pane: Pane) -> str | None:
        return pane.hook_agent or pane.detected

    def is_agent(self, pane: Pane) -> bool:
        return pane.name is not None or self.effective_label(pane) is not None

    def status(self, pane: Pane) -> str:
        if pane.state == "idle":
            return "idle" if pane.seen else "done"
        return pane.state

    def aggregate(self, pane_ids: list[str]) -> str:
        best = "unknown"
        for pid in pane_ids:
            s = self.status(self.world.panes[pid])
            if RANK[s] > RANK[best]:
                best = s
        return best

    def mark_tab_seen(self, tab: Tab) -> None:
        for pid in self.tab_panes(tab):
            self.world.panes[pid].seen = True

    def focus_workspace(self, ws: Workspace) -> None:
        self.world.active_workspace_id = ws.workspace_id
        if ws.active_tab_id:
            self.mark_tab_seen(self.tab(ws.active_tab_id))

    def focus_tab(self, tab: Tab) -> None:
        ws = self.ws(tab.tab_id.split(":")[0])
        ws.active_tab_id = tab.tab_id
        self.focus_workspace(ws)

    def focus_pane(self, pane: Pane) -> None:
        tab = self.tab_of(pane)
        tab.focused_pane_id = pane.pane_id
        self.focus_tab(tab)

    def set_state(self, pane: Pane, new: str, *, label_changed: bool = False) -> None:
        """Apply an underlying state change: bump the global seq and update `seen` as herdr does."""
        old = pane.state
        if new == old:
            return
        self.world.state_change_seq += 1
        pane.state_change_seq = self.world.state_change_seq
        if new in ("working", "blocked"):
            pane.active_seq = pane.state_change_seq
        if new == "idle" and old in ("working", "blocked"):
            pane.completion_seq += 1  # 0.9.5 row 1: a finished turn (shown only from 0.9.2: agent_info)
        if new != "idle":
            pane.seen = True
        elif old in ("working", "blocked") or (old == "unknown" and not label_changed):
            # No client attached: outer focus is unknown, so only the active tab counts as seen.
            pane.seen = self.in_active_tab(pane)
        pane.state = new  # type: ignore[assignment]
        pane.revision += 1

    # ---- JSON shapes --------------------------------------------------------------------------

    def workspace_label(self, ws: Workspace) -> str:
        if ws.custom_label:
            return ws.custom_label
        root = git_toplevel(ws.cwd)
        if root:
            return os.path.basename(root)
        if os.path.abspath(ws.cwd) == os.path.abspath(os.environ.get("HOME", "/nonexistent")):
            return "~"
        return os.path.basename(ws.cwd.rstrip("/")) or "/"

    def workspace_info(self, ws: Workspace) -> dict[str, Any]:
        info: dict[str, Any] = {
            "workspace_id": ws.workspace_id,
            "number": self.world.workspaces.index(ws) + 1,
            "label": self.workspace_label(ws),
            "focused": self.world.active_workspace_id == ws.workspace_id,
            "pane_count": len(self.ws_panes(ws)),
            "tab_count": len(ws.tabs),
        }
        if ws.active_tab_id:
            info["active_tab_id"] = ws.active_tab_id
        info["agent_status"] = self.aggregate(self.ws_panes(ws))
        if ws.worktree:
            info["worktree"] = dict(ws.worktree)
        return info

    def tab_info(self, tab: Tab) -> dict[str, Any]:
        ws = self.ws(tab.tab_id.split(":")[0])
        return {
            "tab_id": tab.tab_id,
            "workspace_id": ws.workspace_id,
            "number": tab.number,
            "label": tab.custom_label or str(ws.tabs.index(tab) + 1),
            "focused": self.world.active_workspace_id == ws.workspace_id and ws.active_tab_id == tab.tab_id,
            "pane_count": len(self.tab_panes(tab)),
            "agent_status": self.aggregate(self.tab_panes(tab)),
        }

    def foreground_cwd(self, pane: Pane) -> str:
        try:
            return os.readlink(f"/proc/{pane.shell_pid}/cwd")
        except OSError:
            return pane.cwd

    def pane_info(self, pane: Pane) -> dict[str, Any]:
        info: dict[str, Any] = {
            "pane_id": pane.pane_id,
            "terminal_id": pane.terminal_id,
            "workspace_id": pane.workspace_id,
            "tab_id": pane.tab_id,
            "focused": self.pane_focused(pane),
            "cwd": pane.cwd,
            "foreground_cwd": self.foreground_cwd(pane),
        }
        if pane.label:
            info["label"] = pane.label
        label = self.effective_label(pane)
        if label:
            info["agent"] = label
        info["agent_status"] = self.status(pane) if self.is_agent(pane) else "unknown"
        if pane.agent_session:
            info["agent_session"] = dict(pane.agent_session)
        info["scroll"] = {**SCROLL, "viewport_rows": self.profile.height}
        info["revision"] = pane.revision
        if self.profile.restore_error and pane.restore_error is not None:
            info["restore_error"] = pane.restore_error  # 0.9.5 row 2: optional, only when the restore failed
        return info

    def agent_info(self, pane: Pane) -> dict[str, Any]:
        info: dict[str, Any] = {"terminal_id": pane.terminal_id}
        if pane.name:
            info["name"] = pane.name
        label = self.effective_label(pane)
        if label:
            info["agent"] = label
        info.update({
            "agent_status": self.status(pane),
            "workspace_id": pane.workspace_id,
            "tab_id": pane.tab_id,
            "pane_id": pane.pane_id,
            "focused": self.pane_focused(pane),
        })
        if pane.launch_kind:
            info["launch_pending"] = True
        if pane.interactive_ready:
            info["interactive_ready"] = True
        info["state_change_seq"] = pane.state_change_seq
        if self.profile.completion_seq:
            info["completion_seq"] = pane.completion_seq  # 0.9.5 row 1 (0.9.2)
        if pane.agent_session:
            info["agent_session"] = dict(pane.agent_session)
        info["cwd"] = pane.cwd
        info["foreground_cwd"] = self.foreground_cwd(pane)
        info["revision"] = pane.revision
        return info

    def layout(self, tab: Tab) -> dict[str, Any]:
        ws_id = tab.tab_id.split(":")[0]
        panes: list[dict[str, Any]] = []
        splits: list[dict[str, Any]] = []
        walk(tab.layout, dict(AREA), [], panes, splits, tab.focused_pane_id)
        return {"workspace_id": ws_id, "tab_id": tab.tab_id, "zoomed": False, "area": dict(AREA),
                "focused_pane_id": tab.focused_pane_id, "panes": panes,
                "splits": [{"id": split_id(i, s.pop("path")), **s} for i, s in enumerate(splits)]}

    # ---- creation ---------------------------------------------------------------------------------

    def pane_env(self, ws_id: str, tab_id: str, pane_id: str, extra: dict[str, str]) -> dict[str, str]:
        env = dict(extra)  # the user's --env first, then the managed variables, which win
        env.update({
            "HERDR_ENV": "1",
            "HERDR_SOCKET_PATH": str(self.paths.socket_for(self.world.session)),
            "HERDR_WORKSPACE_ID": ws_id,
            "HERDR_TAB_ID": tab_id,
            "HERDR_PANE_ID": pane_id,
            "TERM": "xterm-256color",
            "COLORTERM": "truecolor",
            "HERDR_SIM_HOME": str(self.paths.home),
            "PATH": f"{self.paths.bin}:{os.environ.get('PATH', '/usr/bin:/bin')}",
            "PS1": "$ ",
        })
        if self.profile.term_program:
            try:  # the server spawns panes: its version, which may not be this client's (0.9 DELTA rows 11-12)
                release = versions.parse_release(self.paths.release.read_text())
            except OSError:
                release = None
            version = release.version if release is not None else self.profile.version
            env.update({"TERM_PROGRAM": "herdr", "TERM_PROGRAM_VERSION": version})  # 0.9 DELTA row 16
        return env

    def spawn(self, ws: Workspace, tab_id: str, cwd: str, env: dict[str, str]) -> Pane:
        pane_id = f"{ws.workspace_id}:p{b32(ws.next_pane)}"
        ws.next_pane += 1
        self.world.terminal_counter += 1
        terminal_id = f"term_{int(self.now * 1e6):x}{self.world.terminal_counter:x}"
        unset = SESSION_MARKERS if self.profile.strips_session_markers else ()
        tmux_id, pid = self.tmux.new_pane(terminal_id, cwd, self.pane_env(ws.workspace_id, tab_id, pane_id, env), unset)
        pane = Pane(pane_id=pane_id, terminal_id=terminal_id, workspace_id=ws.workspace_id, tab_id=tab_id,
                    tmux=tmux_id, shell_pid=pid, cwd=cwd)
        self.world.panes[pane_id] = pane
        return pane

    def new_tab(self, ws: Workspace, cwd: str, label: str | None, env: dict[str, str]) -> tuple[Tab, Pane]:
        tab_id = f"{ws.workspace_id}:t{b32(ws.next_tab)}"
        number = ws.next_tab
        ws.next_tab += 1
        pane = self.spawn(ws, tab_id, cwd, env)
        tab = Tab(tab_id=tab_id, number=number, custom_label=label, layout={"pane": pane.pane_id},
                  focused_pane_id=pane.pane_id)
        ws.tabs.append(tab)
        if ws.active_tab_id is None:
            ws.active_tab_id = tab_id
        return tab, pane

    def default_cwd(self) -> str:
        """terminal.new_cwd=follow: the focused pane's cwd, then $HOME, then the process cwd."""
        if self.world.active_workspace_id:
            ws = self.ws(self.world.active_workspace_id)
            if ws.active_tab_id:
                tab = self.tab(ws.active_tab_id)
                if tab.focused_pane_id in self.world.panes:
                    return self.foreground_cwd(self.world.panes[tab.focused_pane_id])
        return os.environ.get("HOME") or os.getcwd()

    def create_workspace(self, cwd: str | None, label: str | None, env: dict[str, str], focus: bool,
                         ) -> tuple[Workspace, Tab, Pane]:
        cwd = cwd or self.default_cwd()
        if not Path(cwd).is_dir():
            raise ApiError("workspace_create_failed", f"failed to create workspace: cwd {cwd} is not a directory")
        ws = Workspace(workspace_id=f"w{b32(self.world.next_workspace)}", custom_label=label, cwd=cwd)
        self.world.next_workspace += 1
        self.world.workspaces.append(ws)
        tab, pane = self.new_tab(ws, cwd, None, env)
        if focus or self.world.active_workspace_id is None:
            self.focus_workspace(ws)
        return ws, tab, pane

    def create_tab(self, ws: Workspace, cwd: str | None, label: str | None, env: dict[str, str],
                   focus: bool) -> tuple[Tab, Pane]:
        tab, pane = self.new_tab(ws, cwd or self.default_cwd(), label, env)
        if focus:
            self.focus_tab(tab)
        return tab, pane

    def split(self, source: Pane, direction: str, ratio: float, cwd: str | None, env: dict[str, str],
              focus: bool) -> Pane:
        ws = self.ws(source.workspace_id)
        tab = self.tab_of(source)
        new = self.spawn(ws, tab.tab_id, cwd or self.foreground_cwd(source), env)
        tab.layout = replace_leaf(tab.layout, source.pane_id,
                                  {"dir": direction, "ratio": ratio, "a": {"pane": source.pane_id},
                                   "b": {"pane": new.pane_id}})
        if focus:
            self.focus_pane(new)
        return new

    # ---- closing ----------------------------------------------------------------------------------

    def group_members(self, ws: Workspace) -> list[Workspace]:
        return [w for w in self.world.workspaces if w.group_parent == ws.workspace_id]

    def drop_pane(self, pane: Pane, kill: bool = True) -> None:
        """Remove a pane from its tab; the caller handles empty tabs and workspaces."""
        if kill:
            self.tmux.kill_pane(pane.tmux)
        tab = self.tab_of(pane)
        tab.layout = remove_leaf(tab.layout, pane.pane_id) or {}
        if tab.focused_pane_id == pane.pane_id:
            rest = leaves(tab.layout)
            tab.focused_pane_id = rest[0] if rest else None
        del self.world.panes[pane.pane_id]

    def close_pane(self, pane: Pane, *, confirm: bool = True, kill: bool = True) -> None:
        ws = self.ws(pane.workspace_id)
        tab = self.tab_of(pane)
        last_in_ws = self.ws_panes(ws) == [pane.pane_id]
        if last_in_ws and confirm and ws.group_parent is None and self.group_members(ws):
            raise ApiError("confirmation_required", "closing this pane would close a worktree group")
        if last_in_ws:
            self.close_workspace(ws, kill=kill)
            return
        self.drop_pane(pane, kill)
        if not leaves(tab.layout):
            self.remove_tab(ws, tab)

    def remove_tab(self, ws: Workspace, tab: Tab) -> None:
        index = ws.tabs.index(tab)
        ws.tabs.remove(tab)
        if ws.active_tab_id == tab.tab_id:
            ws.active_tab_id = ws.tabs[min(index, len(ws.tabs) - 1)].tab_id if ws.tabs else None

    def close_tab(self, tab: Tab) -> None:
        ws = self.ws(tab.tab_id.split(":")[0])
        if len(ws.tabs) == 1 and self.profile.last_tab_closes_workspace:
            # v0.8.2 src/app/api/tabs.rs:227-274: the last tab takes its workspace, unless that closes a group.
            if ws.group_parent is None and self.group_members(ws):
                raise ApiError("confirmation_required", "closing this tab would close a worktree group")
            self.close_workspace(ws)
            return
        if len(ws.tabs) == 1:
            raise ApiError("tab_close_failed", "cannot close the last tab in a workspace")
        for pid in self.tab_panes(tab):
            self.drop_pane(self.world.panes[pid])
        self.remove_tab(ws, tab)

    def close_workspace(self, ws: Workspace, *, kill: bool = True, cascade: bool = True) -> None:
        members = self.group_members(ws) if cascade and ws.group_parent is None else []
        for member in members:
            self.close_workspace(member, kill=kill, cascade=False)
        for pid in self.ws_panes(ws):
            pane = self.world.panes[pid]
            if kill:
                self.tmux.kill_pane(pane.tmux)
            del self.world.panes[pid]
        index = self.world.workspaces.index(ws)
        self.world.workspaces.remove(ws)
        if self.world.active_workspace_id == ws.workspace_id:
            rest = self.world.workspaces
            self.world.active_workspace_id = rest[min(index, len(rest) - 1)].workspace_id if rest else None
            if self.world.active_workspace_id:
                self.focus_workspace(self.ws(self.world.active_workspace_id))

    # ---- moving -----------------------------------------------------------------------------------

    def move_pane(self, raw: str, dest: dict[str, Any], focus: bool) -> dict[str, Any]:
        """pane move (src/app/api/panes.rs:614-1042): take the pane out, re-home it, report the move_result."""
        pane = self.resolve_pane(raw)
        if pane is None:
            raise ApiError("pane_not_found", "source pane not found")
        src_ws = self.ws(pane.workspace_id)
        src_tab = self.tab_of(pane)
        prev = {"previous_pane_id": pane.pane_id, "previous_workspace_id": src_ws.workspace_id,
                "previous_tab_id": src_tab.tab_id}
        target_tab: Tab | None = None
        target_ws: Workspace | None = None
        if dest["kind"] == "tab":
            target_tab = self.resolve_tab(dest["tab"])
            if target_tab is None:
                raise ApiError("tab_not_found", f"tab {dest['tab']} not found")
            if target_tab is src_tab:
                layout = self.layout(src_tab)
                return {"changed": False, "reason": "same_tab", **prev, "pane": self.pane_info(pane),
                        "source_layout": layout, "target_layout": layout, "focused_pane_id": layout["focused_pane_id"]}
            target_ws = self.ws(target_tab.tab_id.split(":")[0])
            if dest["target"] is not None:
                anchor = self.resolve_pane(dest["target"])
                if anchor is None:
                    raise ApiError("target_pane_not_found", f"target pane {dest['target']} not found")
                if anchor.tab_id != target_tab.tab_id:
                    raise ApiError("target_pane_not_found", f"target pane {dest['target']} is not in tab {dest['tab']}")
                anchor_id = anchor.pane_id
            else:
                anchor_id = target_tab.focused_pane_id or self.tab_panes(target_tab)[0]
        elif dest["kind"] == "new_tab":
            target_ws = src_ws
            if dest["workspace"] is not None:
                target_ws = self.resolve_ws(dest["workspace"])
                if target_ws is None:
                    raise ApiError("workspace_not_found", f"workspace {dest['workspace']} not found")
        cross = target_ws is not src_ws
        # Take the pane out of its tab; an emptied tab goes, and an emptied workspace goes on a cross move.
        src_tab.layout = remove_leaf(src_tab.layout, pane.pane_id) or {}
        if src_tab.focused_pane_id == pane.pane_id:
            rest = self.tab_panes(src_tab)
            src_tab.focused_pane_id = rest[0] if rest else None
        closed_tab_id = None
        if not self.tab_panes(src_tab):
            closed_tab_id = src_tab.tab_id
            self.remove_tab(src_ws, src_tab)
        closed_ws_id = None
        if cross and not src_ws.tabs:
            closed_ws_id = src_ws.workspace_id
            index = self.world.workspaces.index(src_ws)
            self.world.workspaces.remove(src_ws)
            if self.world.active_workspace_id == src_ws.workspace_id:
                rest_ws = self.world.workspaces
                self.world.active_workspace_id = rest_ws[min(index, len(rest_ws) - 1)].workspace_id if rest_ws else None
        created_ws = False
        if target_ws is None:  # --new-workspace
            cwd = self.foreground_cwd(pane)
            target_ws = Workspace(workspace_id=f"w{b32(self.world.next_workspace)}", custom_label=dest["label"],
                                  cwd=cwd)
            self.world.next_workspace += 1
            self.world.workspaces.append(target_ws)
            created_ws = cross = True
        if cross:
            # The process keeps its HERDR_PANE_ID; the old id stays an alias for pane commands only.
            old_id = pane.pane_id
            new_id = f"{target_ws.workspace_id}:p{b32(target_ws.next_pane)}"
            target_ws.next_pane += 1
            del self.world.panes[old_id]
            for other in self.world.panes.values():
                if new_id in other.aliases:
                    other.aliases.remove(new_id)  # remove_alias_shadowed_by_new_pane
            pane.aliases.append(old_id)
            pane.pane_id = new_id
            pane.workspace_id = target_ws.workspace_id
            self.world.panes[new_id] = pane
        created_tab = False
        if target_tab is None:
            label = dest["tab_label"] if dest["kind"] == "new_workspace" else dest["label"]
            target_tab = Tab(tab_id=f"{target_ws.workspace_id}:t{b32(target_ws.next_tab)}", number=target_ws.next_tab,
                             custom_label=label, layout={"pane": pane.pane_id}, focused_pane_id=pane.pane_id)
            target_ws.next_tab += 1
            target_ws.tabs.append(target_tab)
            if target_ws.active_tab_id is None:
                target_ws.active_tab_id = target_tab.tab_id
            created_tab = True
        else:
            previous_focus = target_tab.focused_pane_id
            target_tab.layout = replace_leaf(target_tab.layout, anchor_id, {
                "dir": dest["split"], "ratio": min(max(dest["ratio"], 0.1), 0.9), "a": {"pane": anchor_id},
                "b": {"pane": pane.pane_id}})
            target_tab.focused_pane_id = pane.pane_id if focus else previous_focus
        pane.tab_id = target_tab.tab_id
        pane.revision += 1
        if focus or self.world.active_workspace_id is None:
            self.focus_pane(pane)
        result: dict[str, Any] = {"changed": True, **prev, "pane": self.pane_info(pane)}
        if closed_ws_id is None and closed_tab_id is None:
            result["source_layout"] = self.layout(src_tab)
        target_layout = self.layout(target_tab)
        result["target_layout"] = target_layout
        if created_ws:
            result["created_workspace"] = self.workspace_info(target_ws)
        if created_tab:
            result["created_tab"] = self.tab_info(target_tab)
        if closed_ws_id:
            result["closed_workspace_id"] = closed_ws_id
        if closed_tab_id:
            result["closed_tab_id"] = closed_tab_id
        result["focused_pane_id"] = target_layout["focused_pane_id"]
        return result

    # ---- agents -----------------------------------------------------------------------------------

    def agent_target(self, target: str) -> Pane:
        """Strict: the current canonical pane id of an agent pane, else a unique agent name."""
        if PANE_RE.match(target) and target in self.world.panes and self.is_agent(self.world.panes[target]):
            return self.world.panes[target]
        named = [p for p in self.world.panes.values() if p.name == target]
        if not named:
            raise ApiError("agent_not_found", f"agent target {target} not found")
        if len(named) > 1:
            ids = " ".join(f"pane_id={p.pane_id}" for p in named)
            raise ApiError("agent_target_ambiguous", f"agent target {target} is ambiguous; candidates: {ids}")
        return named[0]

    def clear_agent(self, pane: Pane) -> None:
        """The occupant left: drop hook authority, detection, name and launch; state becomes unknown."""
        pane.hook_source = None
        pane.hook_agent = None
        pane.hook_state = pane.screen_state = None
        pane.screen_blocker = False
        pane.name = None
        pane.interactive_ready = False
        pane.launch_kind = pane.launch_typed_at = pane.launch_deadline = None
        self.set_state(pane, "unknown")
        pane.revision += 1

    def report(self, pane: Pane, source: str, agent: str, state: str, seq: int | None,
               session_id: str | None, session_path: str | None) -> None:
        """pane report-agent: seq-based drop, reserved sources, detected-kind conflicts, then the state."""
        label = agent.strip()
        kind = procs.parse_kind(label)
        label = kind or label
        if seq is not None:
            last = pane.hook_seqs.get(source)
            if last is not None and seq <= last:
                return
            pane.hook_seqs[source] = seq
        elif source in pane.hook_seqs:
            return
        if kind and pane.detected and pane.detected != kind:
            return
        if session_id or session_path:
            session = {"source": source, "agent": label}
            session.update({"kind": "id", "value": session_id} if session_id else
                           {"kind": "path", "value": session_path or ""})
            pane.agent_session = session
        if RESERVED_SOURCES.get(source) == label:
            return
        label_changed = pane.hook_agent != label
        if label_changed and pane.hook_agent is not None and pane.name and not pane.launch_kind:
            pane.name = None  # a different agent replaced the occupant
        pane.hook_source = source
        pane.hook_agent = label
        pane.hook_state = state  # type: ignore[assignment]
        if label_changed:
            pane.revision += 1
        self.set_state(pane, self.effective_state(pane), label_changed=label_changed)

    def report_session(self, pane: Pane, source: str, agent: str, seq: int | None,
                       session_id: str | None, session_path: str | None) -> None:
        """pane report-agent-session (0.9.5 profile): the session identity only, never the state; seq-based drop."""
        label = procs.parse_kind(agent.strip()) or agent.strip()
        if seq is not None:
            last = pane.hook_seqs.get(source)
            if last is not None and seq <= last:
                return
            pane.hook_seqs[source] = seq
        if session_id or session_path:
            pane.agent_session = {"source": source, "agent": label, **(
                {"kind": "id", "value": session_id} if session_id else {"kind": "path", "value": session_path or ""})}

    def effective_state(self, pane: Pane) -> str:
        """Hook authority first, except that a visible blocker on screen wins (src/terminal/state.rs:1837-1848);
        without hooks, the screen decides."""
        if pane.hook_agent is not None and pane.hook_state is not None:
            if pane.screen_blocker and pane.hook_state != "blocked" and pane.detected == procs.parse_kind(pane.hook_agent):
                return "blocked"
            return pane.hook_state
        if pane.detected is not None and pane.screen_state is not None:
            return pane.screen_state
        return pane.state

    def screen_due(self, pane: Pane) -> bool:
        """Whether screen detection reads this pane: a known agent with rules, past its start-up grace."""
        return (pane.detected in detect.RULES and pane.detected_at is not None
                and self.now - pane.detected_at >= detect.STARTUP_GRACE_S)

    def detect_screens(self, titles: dict[str, str], screens: dict[str, str] | None = None) -> None:
        """Screen detection for every pane running a known agent (herdr_sim.detect): screen-only agents get their
        state from it, hook-reporting ones only a visible blocker. ``screens``: tmux pane → its screen, read already."""
        for pane in self.world.panes.values():
            if pane.tmux not in titles or not self.screen_due(pane):
                continue
            screen = (screens or {}).get(pane.tmux)
            if screen is None:
                try:
                    screen = "\n".join(self.tmux.capture(pane.tmux, history=False, joined=False, ansi=False))
                except TmuxError:
                    continue
            found = detect.explain(pane.detected, screen, detect.app_title(titles[pane.tmux]),
                                   codex_unknown=self.profile.codex_unknown_ready)
            if found.rule is not None and found.rule.skip_update:
                continue
            pane.screen_state, pane.screen_blocker = found.state, found.visible_blocker  # type: ignore[assignment]
            self.set_state(pane, self.effective_state(pane))

    def release(self, pane: Pane, source: str, agent: str) -> None:
        label = procs.parse_kind(agent.strip()) or agent.strip()
        if pane.hook_source == source and pane.hook_agent == label:
            pane.detected = None
            self.clear_agent(pane)

    def reconcile(self, *, screens: bool = False) -> None:
        """Catch up with reality: exited pane processes, detected agents, launch readiness and deadlines.

        ``screens``: also run screen detection (the server loop does, a few times a second, as herdr's own
        detection loop does; single commands skip it, since every capture is a tmux process).
        """
        read: dict[str, str] = {}
        if screens:
            # The screens detection will read, taken with the titles by one tmux client (a client each cost more
            # than the reading). A pane whose detected kind changes below starts a new grace, so it is never due:
            # the panes due now are all among these; any other (or one whose capture failed) is read on its own.
            titles, read = self.tmux.titles_and_screens([p.tmux for p in self.world.panes.values() if self.screen_due(p)])
        else:
            titles = self.tmux.titles()
        live = set(titles)
        table = procs.scan() if self.world.panes else {}  # one /proc pass for every pane
        for pane in list(self.world.panes.values()):
            if pane.pane_id not in self.world.panes:
                continue
            if pane.tmux not in live:
                # A pane whose process exited disappears; this path never asks for confirmation.
                self.close_pane(pane, confirm=False, kill=False)
                continue
            detected = procs.detect(pane.shell_pid, table)
            if detected != pane.detected:
                previous = pane.detected
                pane.detected = detected
                pane.detected_at = self.now if detected else None
                pane.screen_state, pane.screen_blocker = None, False
                pane.revision += 1
                if previous and detected is None and not pane.launch_kind and (
                        pane.hook_agent in (None, previous)):
                    self.clear_agent(pane)
        if screens:
            self.detect_screens(titles, read)
        for pane in list(self.world.panes.values()):
            if pane.launch_kind:
                self.settle(pane)

    def settle(self, pane: Pane) -> None:
        """A managed launch becomes ready once its kind runs idle/blocked for at least the settle delay."""
        assert pane.launch_kind is not None and pane.launch_typed_at is not None
        kind_seen = pane.hook_agent == pane.launch_kind or pane.detected == pane.launch_kind
        settled = (self.now - pane.launch_typed_at) * 1000 >= self.world.settle_ms
        if self.profile.start_blocked_not_ready:
            # v0.8.2 src/terminal/state.rs:1969-1991: blocked at start-up keeps the name with no deadline (the
            # launch stays pending) until the agent is idle; only then is it interactive-ready.
            if kind_seen and pane.state == "blocked":
                pane.launch_deadline = None
                return
            if pane.launch_deadline is None and kind_seen and pane.state == "idle":
                pane.launch_kind = pane.launch_typed_at = None
                pane.interactive_ready = True
                pane.revision += 1
                return
            if pane.launch_deadline is None:
                return
        # 0.9.5 row 10 (0.9.3): a codex screen no rule matches is `unknown`, and `agent start` takes it as ready.
        codex_unknown = (self.profile.codex_unknown_ready and pane.launch_kind == "codex" and pane.state == "unknown"
                         and pane.screen_state == "unknown" and pane.hook_state is None)
        if kind_seen and (pane.state in ("idle", "blocked") or codex_unknown) and settled:
            pane.launch_kind = pane.launch_typed_at = pane.launch_deadline = None
            pane.interactive_ready = True
            pane.revision += 1
        elif pane.launch_deadline is not None and self.now > pane.launch_deadline:
            pane.launch_kind = pane.launch_typed_at = pane.launch_deadline = None
            pane.name = None  # the server frees the name at its deadline


def leaves(node: dict[str, Any]) -> list[str]:
    if not node:
        return []
    if "pane" in node:
        return [node["pane"]]
    return leaves(node["a"]) + leaves(node["b"])


def replace_leaf(node: dict[str, Any], pane_id: str, new: dict[str, Any]) -> dict[str, Any]:
    if "pane" in node:
        return new if node["pane"] == pane_id else node
    return {**node, "a": replace_leaf(node["a"], pane_id, new), "b": replace_leaf(node["b"], pane_id, new)}


def remove_leaf(node: dict[str, Any], pane_id: str) -> dict[str, Any] | None:
    if "pane" in node:
        return None if node["pane"] == pane_id else node
    a, b = remove_leaf(node["a"], pane_id), remove_leaf(node["b"], pane_id)
    if a is None:
        return b
    if b is None:
        return a
    return {**node, "a": a, "b": b}


def split_id(index: int, path: list[bool]) -> str:
    return f"split_{index}_" + ("".join("1" if p else "0" for p in path) if path else "root")


def walk(node: dict[str, Any], rect: dict[str, int], path: list[bool], panes: list[dict[str, Any]],
         splits: list[dict[str, Any]], focused: str | None) -> None:
    if "pane" in node:
        panes.append({"pane_id": node["pane"], "focused": node["pane"] == focused, "rect": rect})
        return
    splits.append({"path": path, "direction": node["dir"], "ratio": node["ratio"], "rect": rect})
    if node["dir"] == "right":
        first = int(rect["width"] * node["ratio"])
        a = {**rect, "width": first}
        b = {**rect, "x": rect["x"] + first, "width": rect["width"] - first}
    else:
        first = int(rect["height"] * node["ratio"])
        a = {**rect, "height": first}
        b = {**rect, "y": rect["y"] + first, "height": rect["height"] - first}
    walk(node["a"], a, [*path, False], panes, splits, focused)
    walk(node["b"], b, [*path, True], panes, splits, focused)
