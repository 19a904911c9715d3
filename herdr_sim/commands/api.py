"""`herdr api …`: the socket API's schema."""

from __future__ import annotations

import json
import sys


class ApiCommands:
    """The api noun."""

    def api(self, sub: str, args: list[str]) -> int:
        if sub != "schema":
            return self.group_help("api", sub)
        if args not in ([], ["--json"]):
            print("usage: herdr api schema [--json]", file=sys.stderr)
            return 2
        # Real herdr prints the schema embedded in its binary: no server needed (src/cli/api.rs).
        from herdr_sim import schema
        doc = schema.document(self.profile)
        print(json.dumps(doc, indent=None if args else 2, separators=(",", ":") if args else None))
        return 0
