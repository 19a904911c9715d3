"""The scripted agents as a bin dir of their own, for a real herdr session's PATH (the live lane: README)."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

# The kinds the e2e plans start; each executable is named as herdr types it (CONTRACT §8.5: the kind name).
KINDS = ("codex", "claude", "opencode", "pi")
MARKER = "herdr-sim-agents.marker"  # how the live lane tells our dir from a real agent install
SCENARIOS = "scenarios.toml"  # the scenario file the agents read (the lane's tests write it)
USAGE = "usage: python3 -m herdr_sim.agent.bin DIR"


def write_agents(directory: Path) -> Path:
    """Write one scripted agent per kind into ``directory`` (no `herdr`: the session's own stays first); its path."""
    directory = directory.expanduser().absolute()
    directory.mkdir(parents=True, exist_ok=True)
    scenarios = directory / SCENARIOS
    if not scenarios.exists():
        scenarios.write_text("")
    # A real herdr's panes get the server's environment and nothing of ours, so the scenario file is baked in
    # (an explicit HERDR_SIM_SCENARIOS still wins, as it does for the simulator's own agents).
    for kind in KINDS:
        target = directory / kind
        target.write_text(
            f"#!{sys.executable}\nimport os\nos.environ.setdefault('HERDR_SIM_SCENARIOS', {str(scenarios)!r})\n"
            f"from herdr_sim.agent import main\nmain({kind!r})\n"
        )
        target.chmod(0o755)
    (directory / MARKER).write_text("herdr-sim scripted agents (tests/e2e live lane)\n")
    return directory


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1 or args[0].startswith("-"):
        print(USAGE, file=sys.stderr)
        return 2
    directory = write_agents(Path(args[0]))
    print(f"Scripted agents ({', '.join(KINDS)}) written to {directory}. Start the lane's herdr session with them first on its PATH:")
    print(f"PATH={shlex.quote(str(directory))}:$PATH herdr --session acme")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
