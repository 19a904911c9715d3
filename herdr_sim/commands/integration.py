"""`herdr integration …`: the agent integrations herdr installs."""

from __future__ import annotations

import os
import sys


class IntegrationCommands:
    """The integration noun."""

    def integration(self, sub: str, args: list[str]) -> int:
        """§4: local only; install states come from HERDR_SIM_INTEGRATIONS (docs/simulator.md)."""
        from herdr_sim import integrations
        if sub != "status" or args not in ([], ["--outdated-only"]):
            return self.group_help("integration", sub) if sub != "status" else self._usage_int()
        env = dict(os.environ)
        try:
            if args:
                notice = integrations.outdated_notice(env)
                if notice:
                    print(notice, file=sys.stderr)
            else:
                print("\n".join(integrations.status_lines(env)))
        except ValueError as exc:
            print(f"herdr-sim: {exc}", file=sys.stderr)
            return 2
        return 0

    @staticmethod
    def _usage_int() -> int:
        print("usage: herdr integration status [--outdated-only]", file=sys.stderr)
        return 2
