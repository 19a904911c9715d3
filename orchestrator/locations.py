"""Where orch's files live (HOME, ORCH_HOME, the policy dir, the src root), resolved from an environment; pure (no pydantic)."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path

from orchestrator.errors import ConfigError

LEDGER_FILE = "ledger.sqlite3"
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")


def locations(env: Mapping[str, str]) -> dict[str, Path]:
    """`Settings`' fields from ``env``; a relative override is a one-line ConfigError (the callback fast path reads them too)."""
    home = _home(env)
    state = _xdg(env, "XDG_STATE_HOME", home / ".local" / "state")
    config = _xdg(env, "XDG_CONFIG_HOME", home / ".config")
    return {
        "home": home,
        "orch_home": _override(env, "ORCH_HOME", state / "orch", home),
        "policy_dir": _override(env, "ORCH_POLICY_DIR", config / "orch" / "policies", home),
        "src_root": _override(env, "ORCH_SRC_ROOT", home / "src", home),
    }


def _home(env: Mapping[str, str]) -> Path:
    value = env.get("HOME", "")
    if not value or not Path(value).is_absolute():
        raise ConfigError("HOME is not set to an absolute path; orch cannot tell where its state and checkouts live")
    return Path(value)


def _xdg(env: Mapping[str, str], name: str, fallback: Path) -> Path:
    # The XDG Base Directory spec says relative values are invalid and must be ignored.
    value = env.get(name, "")
    return Path(value) if value and Path(value).is_absolute() else fallback


def _override(env: Mapping[str, str], name: str, fallback: Path, home: Path) -> Path:
    value = env.get(name, "")
    if not value:
        return fallback
    # Expand "~" against the HOME we were given, not the process's, so tests and callers stay in control.
    path = home / value[2:] if value == "~" or value.startswith("~/") else Path(value)
    if not path.is_absolute():
        raise ConfigError(f"{name}={json.dumps(value)} is not an absolute path")
    return path


def run_dir(orch_home: Path, run_id: str) -> Path:
    """A run's folder under ORCH_HOME (plan snapshot, packets, reports): its id with unsafe characters as `_`."""
    return orch_home / "runs" / _UNSAFE.sub("_", run_id)
