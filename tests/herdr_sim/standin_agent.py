"""A minimal scripted agent for simulator tests: reports idle, echoes each prompt while working, exits on /exit."""

from __future__ import annotations

import os
import subprocess
import sys


def report(kind: str, state: str) -> None:
    subprocess.run(["herdr", "pane", "report-agent", os.environ["HERDR_PANE_ID"], "--source", "custom:standin",
                    "--agent", kind, "--state", state], check=True, timeout=30)


def main(kind: str) -> None:
    """Serve prompts on stdin until /exit."""
    sys.stdout.write("\x1b[?2004h")
    sys.stdout.write(f"{kind} standin ready\n")
    sys.stdout.flush()
    report(kind, "idle")
    for line in sys.stdin:
        text = line.replace("\x1b[200~", "").replace("\x1b[201~", "").strip()
        if text == "/exit":
            break
        if not text:
            continue
        report(kind, "working")
        sys.stdout.write(f"{kind} got: {text}\n")
        sys.stdout.flush()
        report(kind, "idle")
    sys.stdout.write("\x1b[?2004l")
    sys.stdout.flush()
