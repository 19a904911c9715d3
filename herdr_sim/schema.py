"""`api schema --json`: a generated document listing the socket methods this simulator really implements."""

from __future__ import annotations

from typing import Any

from herdr_sim.versions import Profile

METHODS = (
    "ping", "server.status", "workspace.list", "workspace.create", "workspace.get", "workspace.close",
    "tab.list", "tab.create", "tab.rename", "tab.close", "pane.current", "pane.list", "pane.get", "pane.layout",
    "pane.split", "pane.move", "pane.read", "pane.send_text", "pane.send_keys", "pane.send_input", "pane.close",
    "pane.rename", "pane.report_agent", "pane.release_agent", "pane.wait_for_output", "worktree.list",
    "worktree.create", "worktree.open", "worktree.remove", "agent.list", "agent.get", "agent.start",
    "agent.prompt", "agent.wait", "agent.read", "agent.send_keys", "agent.rename", "agent.focus", "agent.explain",
)


def document(profile: Profile) -> dict[str, Any]:
    """The schema document with upstream's top-level shape, for one release's protocol and method list."""
    request = {"type": "object", "required": ["id", "method"], "properties": {"id": {"type": "string"}},
               "oneOf": [{"type": "object", "required": ["method", "params"],
                          "properties": {"method": {"const": m, "type": "string"}, "params": {"type": "object"}}}
                         for m in (*METHODS, *profile.extra_methods)]}
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "protocol": profile.protocol,
        "schema_version": 1,
        "title": "herdr socket API (herdr-sim subset)",
        "schemas": {
            "request": request,
            "success_response": {"type": "object", "required": ["id", "result"]},
            "error_response": {"type": "object", "required": ["id", "error"]},
        },
    }
