"""Times `orch inbox add -` with 1 MB and 10 MB callbacks (kept aside as oversize) and measures the ledger's growth.

Run: python3 bench/oversize.py [--sizes-mb 1,10] [--json]. Each message is a well-formed `result` envelope from the
registered worker, so only the size limit stops it. It is sent twice: through the stdin door of a fresh `orch`
process, as a worker's callback would (timed beside a small valid callback, whose time is process start-up alone),
and in this process through `read_stream` + `add_message`, which is the handling itself. The targets (issue 10):
handling under 1 s and under 1 MB of ledger growth (database, WAL and shared-memory files together) per message.
Timing lives here, not in tests: the house rule is no timed assertions in tests (tests/orchestrator/test_inbox.py
asserts the growth and the verdict).
"""

from __future__ import annotations

import argparse
import io
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from orchestrator.engine import Engine
from orchestrator.intake import add_message, read_stream
from packets import DEFAULT_MESSAGE_LIMIT
from fixtures import RUN, orch_executable, seed_dispatched_worker

TARGET_S = 1.0
TARGET_GROWTH = 1024 * 1024


def ledger_bytes(home: Path) -> int:
    """The ledger's footprint on disk: the database and its WAL and shared-memory files."""
    return sum(path.stat().st_size for path in home.glob("ledger.sqlite3*"))


HEADER = f"[herdr-orchestration run={RUN} task=feature-a from=feature-a kind=result reply-to=w1:pa]\n"


def _message(megabytes: int, salt: str) -> bytes:
    return (HEADER + f"Status: done {salt}\n" + "x" * (megabytes * 1024 * 1024)).encode()


def _process(orch: str, env: dict[str, str], data: bytes) -> tuple[float, bytes]:
    start = time.perf_counter()
    done = subprocess.run([orch, "inbox", "add", "--run", RUN, "-"], input=data, env=env, capture_output=True, timeout=120)
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"bench: exit {done.returncode}: {done.stdout!r} {done.stderr!r}")
    return seconds, done.stdout


def main() -> int:
    """Seed a ledger, send each message once through stdin, print seconds and growth against the targets."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes-mb", default="1,10")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    orch = orch_executable()
    rows = []
    with tempfile.TemporaryDirectory(prefix="orch-bench-") as tmp:
        home = Path(tmp) / "orch-home"
        seed_dispatched_worker(home)
        env = {"PATH": "/usr/bin:/bin", "ORCH_HOME": str(home), "HOME": tmp}
        small, _ = _process(orch, env, (HEADER.replace("kind=result", "kind=update") + "warm-up").encode())
        engine = Engine.from_env(env)
        run = engine.ledger.get_run(RUN)
        for megabytes in (int(size) for size in args.sizes_mb.split(",")):
            before = ledger_bytes(home)
            seconds, out = _process(orch, env, _message(megabytes, "via stdin"))
            if b"(oversize)" not in out:
                raise SystemExit(f"bench: {megabytes} MB was not kept aside as oversize: {out!r}")
            process_growth = ledger_bytes(home) - before
            small, _ = _process(orch, env, (HEADER.replace("kind=result", "kind=update") + f"small {megabytes}").encode())
            data, before = _message(megabytes, "in process"), ledger_bytes(home)
            start = time.perf_counter()
            added = add_message(engine, run, read_stream(io.BytesIO(data), DEFAULT_MESSAGE_LIMIT))
            handling = time.perf_counter() - start
            growth = max(process_growth, ledger_bytes(home) - before)
            assert added.reason_code == "oversize", added
            rows.append({"megabytes": megabytes, "handling_s": round(handling, 3), "process_s": round(seconds, 3),
                         "small_callback_process_s": round(small, 3), "ledger_growth_bytes": growth,
                         "ok": handling < TARGET_S and growth < TARGET_GROWTH})  # fmt: skip
        engine.close()
    if args.json:
        print(json.dumps({"python": sys.version.split()[0], "rows": rows}, indent=2))
    else:
        for row in rows:
            verdict = "ok" if row["ok"] else "MISSED"
            print(
                f"{row['megabytes']:>3} MB: handled in {row['handling_s']:.3f} s (target < {TARGET_S:g} s); "
                f"`orch inbox add -` {row['process_s']:.3f} s (a small callback: {row['small_callback_process_s']:.3f} s); "
                f"ledger +{row['ledger_growth_bytes']} bytes (target < {TARGET_GROWTH}): {verdict}"
            )
    return 0 if all(row["ok"] for row in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
