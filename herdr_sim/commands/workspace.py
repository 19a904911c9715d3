"""`herdr workspace …`: list, create, get, close (0.9's --group), focus, rename."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from herdr_sim.commands.base import Flags, Usage, abspath, parse_env
from herdr_sim.errors import ApiError

if TYPE_CHECKING:
    from herdr_sim.engine import Engine


class WorkspaceCommands:
    """The workspace noun."""

    def workspace(self, sub: str, args: list[str]) -> int:
        rid = f"cli:workspace:{sub}"
        cmd = f"workspace {sub}"
        if sub == "list":
            if args:
                raise Usage("usage: herdr workspace list")
            return self.request(rid, cmd, lambda e: {"type": "workspace_list", "workspaces": [
                e.workspace_info(w) for w in e.world.workspaces]})
        if sub == "create":
            f = Flags(args, values=("--cwd", "--label"), bools=("--focus", "--no-focus"), multi=("--env",))
            if f.positional:
                raise Usage(f"unknown option: {f.positional[0]}")
            env = parse_env(f.multi["--env"])
            cwd = abspath(f.values["--cwd"]) if "--cwd" in f.values else None

            def create(e: Engine) -> dict[str, Any]:
                ws, tab, pane = e.create_workspace(cwd, f.values.get("--label"), env, f.focus(False))
                return {"type": "workspace_created", "workspace": e.workspace_info(ws), "tab": e.tab_info(tab),
                        "root_pane": e.pane_info(pane)}
            return self.request(rid, cmd, create)
        if sub == "close" and self.profile.workspace_group_close and "--group" in args[1:]:
            args = [a for a in args if a != "--group"]
            return self.by_id("workspace", sub, args, lambda e: (e.resolve_ws, e.close_workspace, e.focus_workspace, e.workspace_info))
        if sub == "close" and self.profile.workspace_group_close:
            return self.by_id("workspace", sub, args, lambda e: (e.resolve_ws, lambda ws: self._close_no_group(e, ws), e.focus_workspace, e.workspace_info))
        if sub in ("get", "close", "focus", "rename"):
            return self.by_id("workspace", sub, args, lambda e: (e.resolve_ws, e.close_workspace, e.focus_workspace, e.workspace_info))
        return self.group_help("workspace", sub)

    @staticmethod
    def _close_no_group(e: Engine, ws: Any) -> None:
        """0.9 (#2874): a primary workspace with open linked-worktree workspaces closes only with `--group`."""
        if ws.group_parent is None and e.group_members(ws):
            raise ApiError("workspace_group_close_required",
                           f"workspace {ws.workspace_id} has open worktree workspaces; use `workspace close {ws.workspace_id} --group`")
        e.close_workspace(ws)
