"""The simulated network's `ssh`: what orch runs on another simulated host (git, orch, `herdr integration status`).

Saved machines (herdr_sim/machines.py) are herdr's door to another host; this is the other one, the plain `ssh` orch
uses for what herdr does not forward. Both read the same network file (``$HERDR_SIM_NETWORK``: ``{"targets": {TARGET:
{"home": SIM_HOME, "env": {...}, "cwd": DIR, "down": false}}}``). It reads ssh's options, the target and the command
words after `--` as real ssh does, joins the words with spaces into one string and hands that to `sh -c` in the
target's environment only (as sshd hands it to the user's login shell: nothing of the caller's environment crosses).
An unknown or ``down`` target exits 255 with ssh's words, as ssh does. ``install(bin_dir)`` writes the executable
`ssh` that goes first on the caller's PATH (the e2e tests' and `orch demo --hosts`'s controller).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from herdr_sim.machines import targets

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
    host = targets().get(target)
    if host is None:
        print(f"ssh: Could not resolve hostname {target}: Name or service not known", file=sys.stderr)
        return 255
    if host.get("down"):
        print(f"ssh: connect to host {target} port 22: Connection refused", file=sys.stderr)
        return 255
    if not rest:
        print("ssh (herdr-sim): no interactive sessions on the simulated network", file=sys.stderr)
        return 255
    # stdin, stdout and stderr pass straight through, as over a real ssh channel: git's fetch talks to the remote
    # upload-pack both ways, which a buffered answer would deadlock.
    sys.stdout.flush()
    done = subprocess.run(["sh", "-c", " ".join(rest)], env=dict(host["env"]), cwd=host.get("cwd"), timeout=600)
    return done.returncode


def install(bin_dir: Path) -> Path:
    """Write the `ssh` executable (this module, run by this interpreter) into ``bin_dir``; returns its path."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    path = bin_dir / "ssh"
    # Only the standard library is needed: `-S` skips site (as the simulator's `herdr` does), the package's own root
    # goes on the path instead, so it runs the same from a checkout, an editable install or a wheel.
    root = str(Path(__file__).resolve().parent.parent)
    path.write_text(f"#!{sys.executable} -S\nimport sys\nsys.path.append({root!r})\nfrom herdr_sim.ssh import main\nsys.exit(main())\n")
    path.chmod(0o755)
    return path
