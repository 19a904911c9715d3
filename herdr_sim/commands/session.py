"""`herdr status` and `herdr session …`: the server and its named sessions."""

from __future__ import annotations

import sys
from typing import Any

from herdr_sim.commands.base import emit
from herdr_sim import versions
from herdr_sim.ids import SESSION_RE


class SessionCommands:
    """The status command and the session noun."""

    def status(self, args: list[str]) -> int:
        as_json = "--json" in args
        rest = [a for a in args if a != "--json"]
        if len(rest) > 1 or (rest and rest[0] not in ("server", "client")):
            print("usage: herdr status [server|client] [--json]", file=sys.stderr)
            return 2
        up = self.up_at(self.socket)
        version, protocol = self.profile.version, self.profile.protocol
        client = {"version": version, "channel": "stable", "protocol": protocol,
                  "binary": str(self.paths.bin / "herdr"), "session": self.session_name}
        server = self.server_release()
        fits = versions.compatible(self.profile, server)
        # src/cli/status.rs:296-305: a restart is needed whenever the server's version is not the client's.
        restart = up and server.version != version
        capabilities: dict[str, bool] = {"live_handoff": True, "detached_server_daemon": True}
        if server.profile.negotiates:
            capabilities.update(surface_interest=True, health_check=True)  # 0.9 DELTA row 11 (CM): saved machines need them
        srv: dict[str, Any] = {"status": "running" if up else "not_running", "running": up,
                               "version": server.version if up else None, "protocol": server.profile.protocol if up else None,
                               "capabilities": capabilities if up else None,
                               "compatible": fits if up else None, "socket": str(self.socket),
                               "session": self.session_name, "restart_needed": restart}
        if as_json:
            full = {"client": client, "server": srv, "update": {"restart_needed": restart}}
            emit(full if not rest else full[rest[0]])
            return 0
        lines = []
        if rest != ["server"]:
            lines += ["client:", f"  version: {version}", "  channel: stable", f"  protocol: {protocol}"]
        if not rest:
            lines.append("")
        if rest != ["client"]:
            lines.append("server:")
            if up:
                lines += ["  status: running", f"  version: {server.version}", f"  protocol: {server.profile.protocol}",
                          f"  compatible: {'yes' if fits else 'no'}"]
            else:
                lines.append("  status: not running")
            lines.append(f"  socket: {self.socket}")
        if not rest:
            lines += ["", "update:", f"  restart_needed: {'yes' if restart else 'no'}"]
        print("\n".join(lines))
        return 0

    def session(self, sub: str, args: list[str]) -> int:
        if sub != "list":
            return self.group_help("session", sub)
        if args not in ([], ["--json"]):
            print("usage: herdr session list [--json]", file=sys.stderr)
            return 2
        names: list[str | None] = [None]
        try:
            found = sorted(d.name for d in (self.paths.home / "sessions").iterdir() if d.is_dir())
        except OSError:
            found = []
        names += [n for n in found if n != "default" and SESSION_RE.match(n) and n not in (".", "..")]
        rows = [{"name": name or "default", "default": name is None, "running": self.up_at(self.paths.socket_for(name)),
                 "socket_path": str(self.paths.socket_for(name)), "session_dir": str(self.paths.session_dir(name))}
                for name in names]
        if args:
            emit({"sessions": rows})
        else:
            # src/cli.rs:901-916: a padded table, widths 20/8/48.
            print(f"{'name':<20} {'status':<8} {'directory':<48} socket")
            for row in rows:
                print(f"{row['name']:<20} {'running' if row['running'] else 'stopped':<8} {row['session_dir']:<48} "
                      f"{row['socket_path']}")
        return 0
