"""The simulator's agent executables when real agents play (HERDR_SIM_AGENT_MODULE=herdr_sim.model.launch).

The pane types the kind's name, the simulator's bin runs `main(kind)`, and this replaces itself with the kind's
launcher in $HERDR_SIM_REAL_AGENTS (herdr_sim.model.agents.write_launchers): the pane's foreground process is then
the real agent, found by its name as herdr finds it.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from herdr_sim.model.agents import REAL_AGENTS_ENV


def main(kind: str) -> None:
    """Exec the real agent of this kind, or say in one line why there is none (exit 127, like a missing command)."""
    directory = os.environ.get(REAL_AGENTS_ENV)
    launcher = Path(directory) / kind if directory else None
    if launcher is None or not os.access(launcher, os.X_OK):
        print(f"{kind}: no real {kind} agent installed for this lane ({REAL_AGENTS_ENV}={directory or 'unset'})", file=sys.stderr)
        sys.exit(127)
    os.execv(launcher, [str(launcher), *sys.argv[1:]])
