"""`integration status`: herdr's integration registry per release, with install state decided by HERDR_SIM_INTEGRATIONS."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from herdr_sim import versions

DEFAULT = "codex,claude,opencode,pi"
STATES = ("current", "outdated", "legacy", "repair")


@dataclass(frozen=True)
class Target:
    """One integration target: label, install path relative to its config dir, expected version."""

    name: str
    version: int


# herdr's registry order on Linux (src/integration/registry.rs:256-…); versions from src/integration/mod.rs.
TARGETS = (Target("pi", 6), Target("omp", 6), Target("claude", 7), Target("codex", 6), Target("copilot", 2),
           Target("devin", 2), Target("droid", 2), Target("kimi", 5), Target("opencode", 9), Target("kilo", 3),
           Target("hermes", 3), Target("qodercli", 2), Target("cursor", 1), Target("mastracode", 1))
# v0.8.2 src/integration/registry.rs:265-360 (order) and src/integration/mod.rs (versions): qwen, antigravity-cli
# and grok are new, most hook versions moved on.
TARGETS_082 = (Target("pi", 8), Target("omp", 8), Target("claude", 8), Target("codex", 8), Target("copilot", 3),
               Target("devin", 2), Target("droid", 3), Target("kimi", 7), Target("opencode", 10), Target("kilo", 4),
               Target("hermes", 5), Target("qodercli", 3), Target("qwen", 1), Target("cursor", 1),
               Target("mastracode", 2), Target("antigravity-cli", 2), Target("grok", 1))
# `needs repair (vN)`: installed >= expected but Outdated, which v0.8.2 src/integration/registry.rs:450-471 makes
# reachable only for grok (hook config) and opencode (its TUI plugin).
REPAIRABLE = ("grok", "opencode")


def targets(profile: versions.Profile | None = None) -> tuple[Target, ...]:
    """The release's registry, in its order."""
    return TARGETS_082 if (profile or versions.current()).needs_repair else TARGETS


NAMES = tuple(t.name for t in TARGETS)


def _dir(env: dict[str, str], var: str | None, *rel: str) -> Path:
    """herdr's config_dir_from_env_or_home: the env var (with ~ expanded) wins over $HOME/<rel>."""
    home = Path(env.get("HOME") or "/")
    if var and env.get(var):
        raw = env[var]
        if raw == "~":
            return home
        if raw.startswith("~"):
            return home / raw[1:].lstrip("/")
        return Path(raw)
    return home.joinpath(*rel)


def install_path(name: str, env: dict[str, str]) -> Path:
    """Where herdr looks for the installed integration of a target (src/integration/env.rs)."""
    home = Path(env.get("HOME") or "/")
    hook = "herdr-agent-state.sh"
    if name == "pi":
        return _dir(env, "PI_CODING_AGENT_DIR", ".pi", "agent") / "extensions" / "herdr-agent-state.ts"
    if name == "omp":
        return _dir(env, "PI_CODING_AGENT_DIR", ".omp", "agent") / "extensions" / "herdr-omp-agent-state.ts"
    if name == "claude":
        return _dir(env, "CLAUDE_CONFIG_DIR", ".claude") / "hooks" / hook
    if name == "codex":
        return _dir(env, "CODEX_HOME", ".codex") / hook
    if name == "copilot":
        return _dir(env, "COPILOT_HOME", ".copilot") / "hooks" / hook
    if name == "devin":
        xdg = env.get("XDG_CONFIG_HOME")
        return (_dir(env, "XDG_CONFIG_HOME") if xdg else home / ".config") / "devin" / hook
    if name == "droid":
        return home / ".factory" / "hooks" / hook
    if name == "kimi":
        return _dir(env, "KIMI_CODE_HOME", ".kimi-code") / "hooks" / hook
    if name == "opencode":
        return home / ".config/opencode" / "plugins" / "herdr-agent-state.js"
    if name == "kilo":
        return home / ".config/kilo" / "plugin" / "herdr-agent-state.js"
    if name == "hermes":
        return home / ".hermes" / "plugins" / "herdr-agent-state" / "__init__.py"
    if name == "qodercli":
        return _dir(env, "QODER_CONFIG_DIR", ".qoder") / "hooks" / hook
    if name == "cursor":
        return _dir(env, "CURSOR_CONFIG_DIR", ".cursor") / hook
    if name == "qwen":
        return _dir(env, "QWEN_HOME", ".qwen") / "hooks" / hook
    if name == "antigravity-cli":
        return _dir(env, "ANTIGRAVITY_CLI_CONFIG_DIR", ".gemini", "config") / "hooks" / hook
    if name == "grok":
        grok = _dir(env, "GROK_CONFIG_DIR") if env.get("GROK_CONFIG_DIR") else _dir(env, "GROK_HOME", ".grok")
        return grok / "hooks" / hook
    return home / ".mastracode" / "hooks" / hook


def configured(env: dict[str, str]) -> dict[str, str]:
    """HERDR_SIM_INTEGRATIONS parsed: target → current|outdated|legacy|repair; unknown words raise ValueError."""
    profile = versions.current(env)
    names = tuple(t.name for t in targets(profile))
    raw = env.get("HERDR_SIM_INTEGRATIONS", DEFAULT)
    out: dict[str, str] = {}
    for item in (part.strip() for part in raw.split(",")):
        if not item:
            continue
        name, _, state = item.partition(":")
        state = state or "current"
        repair_ok = state != "repair" or (profile.needs_repair and name in REPAIRABLE)
        if name not in names or state not in STATES or not repair_ok:
            repair = f"[:repair] (repair: herdr {profile.version} can say it only for {', '.join(REPAIRABLE)})" \
                if profile.needs_repair else ""
            raise ValueError(f"invalid HERDR_SIM_INTEGRATIONS entry: {item} (expected <target>[:outdated|:legacy]"
                             f"{repair} with target one of {', '.join(names)})")
        out[name] = state
    return out


def status_lines(env: dict[str, str]) -> list[str]:
    """`herdr integration status` lines (src/cli/integration.rs:24-58)."""
    states = configured(env)
    lines = []
    for target in targets(versions.current(env)):
        state = states.get(target.name)
        if state is None:
            text = "not installed"
        elif state == "current":
            text = f"current (v{target.version})"
        elif state == "repair":
            text = f"needs repair (v{target.version})"  # v0.8.2 src/cli/integration.rs:50-56
        else:
            installed = "legacy" if state == "legacy" or target.version == 1 else f"v{target.version - 1}"
            text = f"outdated ({installed} < v{target.version})"
        lines.append(f"{target.name}: {text} ({install_path(target.name, env)})")
    return lines


def outdated_notice(env: dict[str, str]) -> str | None:
    """The `--outdated-only` stderr line, or None when nothing is outdated (registry.rs print_outdated_update_notice)."""
    names = [t.name for t in targets(versions.current(env)) if configured(env).get(t.name) in ("outdated", "legacy", "repair")]
    if not names:
        return None
    commands = [f"herdr integration install {n}" for n in names]
    joined = commands[0] if len(commands) == 1 else f"{', '.join(commands[:-1])} and {commands[-1]}"
    return f"installed herdr integrations need updating; run {joined}."

