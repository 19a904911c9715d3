"""Settings read from the environment (state dir, policy dir, src root) and the shared edge for reading our TOML files."""

from __future__ import annotations

import json
import os
import re
import tomllib
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from orchestrator.errors import ConfigError


class Settings(BaseModel):
    """Resolved locations; absolute paths, never read from anywhere but the environment given."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    home: Path
    orch_home: Path
    policy_dir: Path
    src_root: Path

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Settings:
        """Build settings from ``env`` (default ``os.environ``); a relative override is a one-line ConfigError."""
        env = os.environ if env is None else env
        home = _home(env)
        state = _xdg(env, "XDG_STATE_HOME", home / ".local" / "state")
        config = _xdg(env, "XDG_CONFIG_HOME", home / ".config")
        return cls(
            home=home,
            orch_home=_override(env, "ORCH_HOME", state / "orch", home),
            policy_dir=_override(env, "ORCH_POLICY_DIR", config / "orch" / "policies", home),
            src_root=_override(env, "ORCH_SRC_ROOT", home / "src", home),
        )


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


_TOML_POSITION = re.compile(r"\s*\(at line (\d+), column (\d+)\)$")
_TOML_AT_END = re.compile(r"\s*\(at end of document\)$")


def read_toml(path: Path, display: str) -> dict[str, Any]:
    """Parse a TOML file; a missing file or a syntax error is one ConfigError line `<display>:<line>:<col>: ...`."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"{display}: no such file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{display}: cannot read: {exc}") from None
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        # Python 3.11's TOMLDecodeError has no position attributes; the position is only in the message.
        message = str(exc)
        if match := _TOML_POSITION.search(message):
            line, column = int(match[1]), int(match[2])
            message = message[: match.start()]
        else:
            lines = text.split("\n")
            line, column = len(lines), len(lines[-1]) + 1
            message = _TOML_AT_END.sub("", message)
        raise ConfigError(f"{display}:{line}:{column}: invalid TOML: {message}") from None


Locator = Callable[[tuple[int | str, ...]], str]


def validation_problems(exc: ValidationError, locate: Locator) -> list[str]:
    """Translate a pydantic ValidationError into one `<where>: <what>` line per error, without pydantic's wording."""
    problems: list[str] = []
    for error in exc.errors(include_url=False):
        if error["type"] == "too_short" and error.get("input"):
            continue  # pydantic's echo of item errors already reported one by one, not a real "empty" problem
        where = locate(tuple(error["loc"]))
        problems.append(f"{where}: {_describe(error)}" if where else _describe(error))
    return problems


def dotted(loc: tuple[int | str, ...]) -> str:
    """Render a pydantic location as `a.b[2].c`."""
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def _describe(error: Any) -> str:
    kind, value = error["type"], error.get("input")
    message: str = error["msg"]
    if kind == "missing":
        return "is required"
    if kind == "extra_forbidden":
        return "is not a known field"
    if kind in ("value_error", "assertion_error"):
        return str(message).split(", ", 1)[1] if ", " in message else str(message)
    if kind == "literal_error":
        message = "must be " + str(error["ctx"]["expected"]).replace("'", '"')
    elif message.startswith("Input should be "):
        message = "must be " + message.removeprefix("Input should be ")
    elif kind in ("too_short", "string_too_short"):
        least = error.get("ctx", {}).get("min_length", 1)
        message = "must not be empty" if least == 1 else f"must have at least {least} {'items' if kind == 'too_short' else 'characters'}"
    if isinstance(value, str | int | float | bool) and kind not in ("string_too_short", "too_short"):
        message += f", got {json.dumps(value, ensure_ascii=False)}"
    return message
