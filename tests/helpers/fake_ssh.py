"""A stand-in `ssh` for e2e tests of a plan's other hosts: the simulated network's targets, each with its own environment.

It reads ssh's options, the target and the command words after `--` as real ssh does, joins the words with spaces into
one string and hands that to `sh -c` in the target's environment only (as sshd hands it to the user's login shell:
nothing of the caller's environment crosses). The target comes from the same network file the simulator's saved
machines use (``$HERDR_SIM_NETWORK``, herdr_sim/machines.py): ``{"targets": {TARGET: {"home": SIM_HOME, "env": {...},
"cwd": DIR, "down": false}}}``. An unknown or ``down`` target exits 255 with ssh's words, as ssh does.
``install(bin_dir)`` writes the executable `ssh` a test puts first on orch's PATH.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

# ssh options that take a value (ssh(1) SYNOPSIS).
_WITH_VALUE = set("BbcDEeFIiJLlmOoPpQRSWw")


def main(argv: list[str] | None = None) -> int:
    """Run one `ssh [options] TARGET [--] COMMAND...` against the simulated network."""
    args = list(sys.argv[1:] if argv is None else argv)
    i = 0
    while i < len(args) and args[i].startswith("-") and args[i] != "--":
        flag = args[i]
        i += 2 if len(flag) == 2 and flag[1] in _WITH_VALUE else 1
    if i >= len(args):
        print("usage: ssh [options] destination [command [argument ...]]", file=sys.stderr)
        return 255
    target, rest = args[i], args[i + 1:]
    if rest[:1] == ["--"]:
        rest = rest[1:]
    network = os.environ.get("HERDR_SIM_NETWORK")
    targets = json.loads(Path(network).read_text()).get("targets", {}) if network and Path(network).is_file() else {}
    host = targets.get(target)
    if host is None:
        print(f"ssh: Could not resolve hostname {target}: Name or service not known", file=sys.stderr)
        return 255
    if host.get("down"):
        print(f"ssh: connect to host {target} port 22: Connection refused", file=sys.stderr)
        return 255
    if not rest:
        print("fake ssh: no interactive sessions", file=sys.stderr)
        return 255
    # stdin, stdout and stderr pass straight through, as over a real ssh channel: git's fetch talks to the remote
    # upload-pack both ways, which a buffered answer would deadlock.
    sys.stdout.flush()
    done = subprocess.run(["sh", "-c", " ".join(rest)], env=dict(host["env"]), cwd=host.get("cwd"), timeout=600)
    return done.returncode


def install(bin_dir: Path) -> Path:
    """Write the `ssh` executable (this module run by the tests' Python) into ``bin_dir``."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    path = bin_dir / "ssh"
    here = Path(__file__).resolve().parent
    path.write_text(f"#!{sys.executable}\nimport sys\nsys.path.insert(0, {str(here)!r})\nfrom fake_ssh import main\nsys.exit(main())\n")
    path.chmod(0o755)
    return path
