"""`herdr tab …`: list, create, get, close, focus, rename."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from herdr_sim.commands.base import Flags, Usage, abspath, parse_env
from herdr_sim.errors import ApiError

if TYPE_CHECKING:
    from herdr_sim.engine import Engine


class TabCommands:
    """The tab noun."""

    def tab(self, sub: str, args: list[str]) -> int:
        rid = f"cli:tab:{sub}"
        cmd = f"tab {sub}"
        if sub == "list":
            f = Flags(args, values=("--workspace",))
            if f.positional:
                raise Usage("usage: herdr tab list [--workspace <workspace_id>]")

            def listing(e: Engine) -> dict[str, Any]:
                spaces = e.world.workspaces
                if "--workspace" in f.values:
                    ws = e.resolve_ws(f.values["--workspace"])
                    if ws is None:
                        raise ApiError("workspace_not_found", f"workspace {f.values['--workspace']} not found")
                    spaces = [ws]
                return {"type": "tab_list", "tabs": [e.tab_info(t) for w in spaces for t in w.tabs]}
            return self.request(rid, cmd, listing)
        if sub == "create":
            f = Flags(args, values=("--workspace", "--cwd", "--label"), bools=("--focus", "--no-focus"),
                      multi=("--env",))
            if f.positional:
                raise Usage(f"unknown option: {f.positional[0]}")
            env = parse_env(f.multi["--env"])
            cwd = abspath(f.values["--cwd"]) if "--cwd" in f.values else None

            def create(e: Engine) -> dict[str, Any]:
                if "--workspace" in f.values:
                    ws = e.resolve_ws(f.values["--workspace"])
                    if ws is None:
                        raise ApiError("workspace_not_found", f"workspace {f.values['--workspace']} not found")
                elif e.world.active_workspace_id:
                    ws = e.ws(e.world.active_workspace_id)
                else:
                    raise ApiError("workspace_not_found", "no active workspace")
                tab, pane = e.create_tab(ws, cwd, f.values.get("--label"), env, f.focus(False))
                return {"type": "tab_created", "tab": e.tab_info(tab), "root_pane": e.pane_info(pane)}
            return self.request(rid, cmd, create)
        if sub in ("get", "close", "focus", "rename"):
            return self.by_id("tab", sub, args, lambda e: (e.resolve_tab, e.close_tab, e.focus_tab, e.tab_info))
        return self.group_help("tab", sub)
