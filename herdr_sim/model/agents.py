"""The four real agent CLIs: pinned npm installs in a cache, a private offline HOME per launch, and pane launchers.

`python -m herdr_sim.model.agents install [--cache DIR] [KIND…]` installs them (one line, and exit 0, when node/npm
or the registry is missing: the lane then skips). Facts (packages, configuration keys) are those of
`../shared/real-agents/README.md`, measured on the pinned versions.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

KINDS = ("pi", "claude", "codex", "opencode")
MODEL = "orch-scripted"
PROVIDER = "orchsim"
# A fixed fake key: the scripted model takes any; claude remembers it approved one by its last 20 characters.
API_KEY = "sk-ant-api03-orch-offline-scripted-model-0000000000"
NPM_TIMEOUT_S = 900
STAMP = ".orch-installed"
REAL_AGENTS_ENV = "HERDR_SIM_REAL_AGENTS"  # the launchers' dir: herdr_sim.model.launch execs the kind's launcher there


@dataclass(frozen=True)
class Agent:
    """One agent CLI: its npm package, the version pinned here, and the executable its package installs."""

    kind: str
    package: str
    version: str
    exe: str


AGENTS = {
    "claude": Agent("claude", "@anthropic-ai/claude-code", "2.1.328", "claude"),
    "codex": Agent("codex", "@openai/codex", "0.169.0", "codex"),
    "opencode": Agent("opencode", "opencode-ai", "1.18.33", "opencode"),
    "pi": Agent("pi", "@mariozechner/pi-coding-agent", "0.73.1", "pi"),
}


def cache_dir(env: dict[str, str] | None = None) -> Path:
    """Where installs live: $ORCH_REAL_AGENTS_CACHE, else $XDG_CACHE_HOME/orch-real-agents, else ~/.cache/…."""
    env = dict(os.environ if env is None else env)
    if env.get("ORCH_REAL_AGENTS_CACHE"):
        return Path(env["ORCH_REAL_AGENTS_CACHE"])
    base = Path(env["XDG_CACHE_HOME"]) if env.get("XDG_CACHE_HOME") else Path(env.get("HOME", "~")).expanduser() / ".cache"
    return base / "orch-real-agents"


def prefix(cache: Path, kind: str) -> Path:
    """The npm prefix of one pinned agent (a new version gets a new dir, so a cache never mixes versions)."""
    agent = AGENTS[kind]
    return cache / f"{kind}-{agent.version}"


def executable(cache: Path, kind: str) -> Path | None:
    """The installed agent's executable (npm's `.bin` link, named like the kind), or None when it is not installed."""
    where = prefix(cache, kind)
    exe = where / "node_modules" / ".bin" / AGENTS[kind].exe
    return exe if (where / STAMP).exists() and exe.exists() else None


def install(cache: Path, kinds: tuple[str, ...] = KINDS, *, say: object = None) -> tuple[dict[str, Path], list[str]]:
    """Install what is missing; returns the executables found and one line per kind that could not be installed."""
    report = say if callable(say) else (lambda line: None)
    found: dict[str, Path] = {}
    problems: list[str] = []
    npm = shutil.which("npm")
    node = shutil.which("node")
    for kind in kinds:
        exe = executable(cache, kind)
        if exe is not None:
            found[kind] = exe
            continue
        agent = AGENTS[kind]
        if npm is None or node is None:
            problems.append(f"{kind}: skipped, {'npm' if npm is None else 'node'} is not on PATH (node 20 and npm install the real agents)")
            continue
        where = prefix(cache, kind)
        where.mkdir(parents=True, exist_ok=True)
        argv = [npm, "install", "--prefix", str(where), "--cache", str(cache / "npm-cache"), "--no-audit", "--no-fund",
                "--no-update-notifier", "--loglevel=error", f"{agent.package}@{agent.version}"]
        report(f"real agents: installing {agent.package}@{agent.version} into {where}")
        try:
            done = subprocess.run(argv, capture_output=True, text=True, timeout=NPM_TIMEOUT_S, stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired:
            problems.append(f"{kind}: skipped, `npm install {agent.package}@{agent.version}` took over {NPM_TIMEOUT_S} s")
            continue
        if done.returncode != 0:
            last = (done.stderr.strip().splitlines() or ["no output"])[-1]
            problems.append(f"{kind}: skipped, `npm install {agent.package}@{agent.version}` exited {done.returncode} ({last})")
            continue
        (where / STAMP).write_text(f"{agent.package}@{agent.version}\n")
        exe = executable(cache, kind)
        if exe is None:
            problems.append(f"{kind}: skipped, {agent.package}@{agent.version} installed no `{agent.exe}` executable")
            continue
        found[kind] = exe
    return found, problems


# --- a private, offline, quiet HOME per launch ---


def template(root: Path, kind: str, url: str, *, ask: bool = False) -> tuple[Path, dict[str, str], list[str]]:
    """Write the kind's home template under ``root``; returns it, the env its launcher sets, and extra argv.

    ``ask``: leave the shell tool unapproved, so the agent shows its own permission form (pi has none).
    """
    home = root / f"{kind}-home"
    if home.exists():
        shutil.rmtree(home)
    home.mkdir(parents=True)
    env: dict[str, str] = {}
    argv: list[str] = []
    v1 = f"{url}/v1"
    if kind == "claude":
        _json(home / ".claude.json", {
            "hasCompletedOnboarding": True, "lastReleaseNotesSeen": AGENTS["claude"].version, "hasSeenAutoDefaultNotice": True,
            "customApiKeyResponses": {"approved": [API_KEY[-20:]], "rejected": []}, "projects": {},
        })  # fmt: skip
        permissions: dict[str, object] = {"defaultMode": "default"}
        if not ask:
            permissions["allow"] = ["Bash"]
        _json(home / ".claude" / "settings.json", {
            "permissions": permissions, "disableAutoMode": "disable",
            "env": {"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "DISABLE_AUTOUPDATER": "1"},
        })  # fmt: skip
        env.update(ANTHROPIC_BASE_URL=url, ANTHROPIC_API_KEY=API_KEY, CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1",
                   DISABLE_AUTOUPDATER="1")
    elif kind == "codex":
        (home / ".codex").mkdir()
        (home / ".codex" / "config.toml").write_text(
            f'model = "{MODEL}"\nmodel_provider = "{PROVIDER}"\n'
            # ask: the sandbox keeps .git read-only, so a commit (and the callback) needs an escalation the person
            # approves at codex's own form; codex 0.169 refuses "untrusted".
            f'approval_policy = "{"on-request" if ask else "never"}"\n'
            f'sandbox_mode = "{"workspace-write" if ask else "danger-full-access"}"\n'
            "check_for_update_on_startup = false\n\n"
            f'[model_providers.{PROVIDER}]\nname = "orch scripted model"\nbase_url = "{v1}"\n'
            'env_key = "ORCH_SCRIPTED_MODEL_KEY"\nwire_api = "responses"\n'
        )
        env.update(ORCH_SCRIPTED_MODEL_KEY=API_KEY)
        argv.append("--no-daemon")  # else a detached app-server daemon outlives it and breaks the next start
    elif kind == "opencode":
        _json(home / ".config" / "opencode" / "opencode.json", {
            "$schema": "https://opencode.ai/config.json",
            "provider": {PROVIDER: {"npm": "@ai-sdk/openai-compatible", "name": "orch scripted model",
                                    "options": {"baseURL": v1, "apiKey": API_KEY}, "models": {MODEL: {"name": MODEL}}}},
            "model": f"{PROVIDER}/{MODEL}", "small_model": f"{PROVIDER}/{MODEL}", "autoupdate": False, "share": "disabled",
            # external_directory: opencode 1.18 asks before any tool (bash too) touches a path outside the folder it
            # started in, whatever `bash` says: a worker writing its report into orch's report dir (outside its
            # worktree) waits at that form. Allowed as the shell tool is; left to the form when `ask`.
            "permission": dict.fromkeys(("bash", "edit", "external_directory"), "ask" if ask else "allow"),
        })  # fmt: skip
        env.update(OPENCODE_DISABLE_AUTOUPDATE="1", OPENCODE_DISABLE_MODELS_FETCH="1", OPENCODE_DISABLE_LSP_DOWNLOAD="1")
    elif kind == "pi":
        _json(home / ".pi" / "agent" / "models.json", {"providers": {PROVIDER: {
            "baseUrl": v1, "api": "openai-completions", "apiKey": API_KEY, "models": [{"id": MODEL, "name": MODEL}]}}})
        _json(home / ".pi" / "agent" / "settings.json", {"defaultProvider": PROVIDER, "defaultModel": MODEL})
        env.update(PI_OFFLINE="1")
    else:
        raise ValueError(f"unknown kind {kind}")
    return home, env, argv


def relocated(root: Path, kind: str, url: str) -> tuple[dict[str, str], list[str]]:
    """The kind's offline configuration under ``root``, reached through the agent's own config-dir variables, HOME kept.

    For `orch doctor --offline`: the person's shell keeps its HOME (their PATH and rc files), while the agent reads
    this configuration instead of theirs, and writes its trust answers and sessions here, not into their config.
    Returns the environment the agent's pane needs and its extra argv.
    """
    home, env, argv = template(root, kind, url)
    if kind == "claude":
        # CLAUDE_CONFIG_DIR holds both settings.json and .claude.json (the global file goes there when it is set).
        shutil.copy2(home / ".claude.json", home / ".claude" / ".claude.json")
        env.update(CLAUDE_CONFIG_DIR=str(home / ".claude"))
    elif kind == "codex":
        env.update(CODEX_HOME=str(home / ".codex"))
    elif kind == "opencode":
        # Not XDG_CONFIG_HOME: a fish shell reads its own config (and PATH) from there. opencode merges the file
        # OPENCODE_CONFIG names over the person's global config; its sessions and caches go to the private dirs.
        env.update(OPENCODE_CONFIG=str(home / ".config" / "opencode" / "opencode.json"), XDG_DATA_HOME=str(home / ".local" / "share"),
                   XDG_STATE_HOME=str(home / ".local" / "state"), XDG_CACHE_HOME=str(home / ".cache"))
    elif kind == "pi":
        env.update(PI_CODING_AGENT_DIR=str(home / ".pi" / "agent"))
    return env, argv


def _json(path: Path, data: object) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2) + "\n")


def write_launchers(directory: Path, executables: dict[str, Path], url: str, *, ask: bool = False) -> Path:
    """One launcher per kind in ``directory``: a fresh copy of the kind's home template, then the real agent.

    Each launch gets its own HOME (three workers of one kind never share a config file they write to) with every
    XDG dir inside it; TMUX is dropped, because a herdr pane is no tmux pane (claude shows its busy title spinner
    only without it).
    """
    directory.mkdir(parents=True, exist_ok=True)
    for kind, exe in executables.items():
        home, env, argv = template(directory / "templates", kind, url, ask=ask)
        lines = [
            "#!/bin/sh",
            f"# {AGENTS[kind].package}@{AGENTS[kind].version}, offline on the scripted model at {url}",
            "unset TMUX TMUX_PANE",
            f"HOME=$(mktemp -d {shlex.quote(str(directory / 'homes'))}/{kind}-XXXXXX) || exit 1",
            f"cp -R {shlex.quote(str(home))}/. \"$HOME\" || exit 1",
            'export HOME XDG_CONFIG_HOME="$HOME/.config" XDG_DATA_HOME="$HOME/.local/share" '
            'XDG_STATE_HOME="$HOME/.local/state" XDG_CACHE_HOME="$HOME/.cache"',
            *(f"export {key}={shlex.quote(value)}" for key, value in env.items()),
            f"exec {shlex.quote(str(exe))} {' '.join(shlex.quote(a) for a in argv)} \"$@\"".replace("  ", " "),
        ]
        (directory / "homes").mkdir(exist_ok=True)
        target = directory / kind
        target.write_text("\n".join(lines) + "\n")
        target.chmod(0o755)
    return directory


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m herdr_sim.model.agents", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    inst = sub.add_parser("install", help="install the pinned agent CLIs into the cache")
    inst.add_argument("--cache", type=Path, help="default: $ORCH_REAL_AGENTS_CACHE or $XDG_CACHE_HOME/orch-real-agents")
    inst.add_argument("kinds", nargs="*", metavar="KIND", help=f"any of {', '.join(KINDS)} (default: all)")
    args = parser.parse_args(argv)
    if unknown := [k for k in args.kinds if k not in KINDS]:
        parser.error(f"unknown kind {unknown[0]} (known: {', '.join(KINDS)})")
    cache = args.cache or cache_dir()
    kinds = tuple(args.kinds) or KINDS
    found, problems = install(cache, kinds, say=lambda line: print(line, file=sys.stderr))
    for kind, exe in found.items():
        print(f"real agents: {kind} {AGENTS[kind].version} at {exe}")
    for line in problems:
        print(f"real agents: {line}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
