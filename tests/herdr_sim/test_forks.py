"""The call zygote (HERDR_SIM_FORKSERVER=1): its `herdr` answers exactly as the cold executable does, and dies with the server."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import pytest

from herdr_sim.alive import pid_alive
from herdr_sim.testing import SimServer

pytestmark = pytest.mark.e2e

COLD = {"HERDR_SIM_FORKSERVER": "0"}  # the test session turns the zygote on for every simulator (tests/conftest.py)

# Each answered by both executables in turn; the state they change is the same, so the answers are too.
CALLS = (
    ["--version"],
    ["workspace", "list"],
    ["pane", "get", "w9:p9"],  # an API error: JSON on stderr, exit 1
    ["workspace", "list", "--json"],  # a usage error: exit 2
    ["nonsense"],
    ["pane", "split", "w1:p1", "--direction", "right", "--no-focus"],
    ["pane", "list"],
)


def run(binary: Path, argv: list[str], env: dict[str, str], cwd: Path) -> tuple[int, str, str]:
    done = subprocess.run([str(binary), *argv], env=env, cwd=cwd, capture_output=True, text=True, timeout=60)
    return done.returncode, done.stdout, done.stderr


def same(answer: tuple[int, str, str], home: Path) -> tuple[int, str, str]:
    """An answer with what names its own server masked: the home's path, the (clock-derived) terminal ids and a new
    pane's foreground cwd (read from /proc while its shell may still be starting)."""

    def mask(text: str) -> str:
        text = re.sub(r"term_[0-9a-f]+", "term_<id>", text.replace(str(home), "<home>"))
        return re.sub(r'"foreground_cwd":"[^"]*"', '"foreground_cwd":"<cwd>"', text)

    code, out, err = answer
    return code, mask(out), mask(err)


def test_the_zygote_client_answers_as_the_cold_executable_does(tmp_path: Path) -> None:
    cold_home, warm_home = tmp_path / "cold", tmp_path / "warm"
    with SimServer(cold_home, COLD) as cold, SimServer(warm_home, {"HERDR_SIM_FORKSERVER": "1"}) as warm:
        assert (warm_home / "calls.sock").exists() and not (cold_home / "calls.sock").exists()
        for sim in (cold, warm):
            assert sim.run(["workspace", "create", "--cwd", str(tmp_path)]).returncode == 0
        for argv in CALLS:
            cold_answer, warm_answer = (same(run(sim.paths.bin / "herdr", argv, sim.env(), tmp_path), sim.home) for sim in (cold, warm))
            assert warm_answer == cold_answer, argv
        # The caller's environment and cwd are the call's, not the zygote's.
        assert run(warm.paths.bin / "herdr", ["--version"], {**warm.env(), "HERDR_SIM_VERSION": "0.8.2"}, tmp_path)[1] == "herdr 0.8.2\n"
        (tmp_path / "here").mkdir()
        code, out, _ = run(warm.paths.bin / "herdr", ["workspace", "create", "--cwd", "."], warm.env(), tmp_path / "here")
        assert code == 0 and json.loads(out)["result"]["root_pane"]["cwd"] == str(tmp_path / "here")
        zygote = int((warm_home / "calls.pid").read_text())
        assert pid_alive(zygote)
    assert not pid_alive(zygote), "the zygote outlived its server"
    assert not (warm_home / "calls.sock").exists()


def test_every_call_is_logged_by_herdr_itself_when_asked(tmp_path: Path) -> None:
    log = tmp_path / "calls.log"
    with SimServer(tmp_path / "sim", {"HERDR_SIM_FORKSERVER": "1"}) as sim:
        env = {**sim.env(), "HERDR_SIM_CALL_LOG": str(log)}
        herdr = sim.paths.bin / "herdr"
        created = run(herdr, ["workspace", "create", "--cwd", str(tmp_path)], env, tmp_path)
        failed = run(herdr, ["pane", "get", "w9:p9"], env, tmp_path)
        run(herdr, ["--version"], sim.env(), tmp_path)  # not asked: not logged
    lines = [json.loads(line) for line in log.read_text().splitlines()]
    assert [(line["pid"], line["argv"][1:], line["rc"], line["stdout"]) for line in lines] == [
        (os.getpid(), ["workspace", "create", "--cwd", str(tmp_path)], 0, created[1]),
        (os.getpid(), ["pane", "get", "w9:p9"], 1, ""),
    ]
    assert failed[0] == 1 and failed[2].startswith('{"id":"cli:pane:get","error":')


def test_without_a_server_the_client_runs_the_call_itself(tmp_path: Path) -> None:
    with SimServer(tmp_path / "sim", {"HERDR_SIM_FORKSERVER": "1"}) as sim:
        herdr, env = sim.paths.bin / "herdr", sim.env()
    # The server (and its zygote) are gone: the same executable gives herdr's no-server answer, as the cold one does.
    code, out, err = run(herdr, ["workspace", "list"], env, tmp_path)
    assert (code, out) == (1, "")
    assert err.startswith("Error: Os { code: 2, kind: NotFound") or '"server_not_running"' in err, err


def test_one_build_of_the_c_client_serves_every_server_that_shares_a_cache(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    overrides = {"HERDR_SIM_FORKSERVER": "1", "HERDR_SIM_CLIENT_CACHE": str(cache)}
    with SimServer(tmp_path / "one", overrides) as one:
        (built,) = cache.iterdir()
        first = built.stat()
        with SimServer(tmp_path / "two", overrides) as two:
            assert list(cache.iterdir()) == [built] and built.stat().st_mtime_ns == first.st_mtime_ns
            for sim in (one, two):
                assert run(sim.paths.bin / "herdr", ["workspace", "create", "--cwd", str(tmp_path)], sim.env(), tmp_path)[0] == 0
                # Each answered by its own server: the client carries that server's socket, not the first one's.
                code, out, _ = run(sim.paths.bin / "herdr", ["workspace", "list"], sim.env(), tmp_path)
                assert code == 0 and len(json.loads(out)["result"]["workspaces"]) == 1


def test_the_client_carries_its_paths_in_fields_of_the_one_build(tmp_path: Path) -> None:
    from herdr_sim import forks

    binary = b"\x7fELF" + b"@herdr-sim-field:sock@".ljust(forks.FIELD, b"\0") + b"rest"
    patched = forks._patch(binary, {"sock": "/tmp/x/calls.sock"})
    assert patched == b"\x7fELF" + b"/tmp/x/calls.sock".ljust(forks.FIELD, b"\0") + b"rest"
    with pytest.raises(ValueError):
        forks._patch(patched, {"sock": "/tmp/y/calls.sock"})  # no marker left: never a half-patched client
    with pytest.raises(ValueError):
        forks._patch(binary, {"sock": "/" + "x" * forks.FIELD})


@pytest.mark.parametrize("client", ["c", "python"])
def test_a_call_killed_by_a_fault_kills_the_client_as_it_kills_the_cold_executable(tmp_path: Path, client: str) -> None:
    # The zygote's call child died of the fault's SIGKILL and its client exited 1 ("the call ended without an exit
    # code"): orch read a protocol error where a cold herdr's caller sees a killed process, an unknown outcome.
    log = tmp_path / "calls.log"
    answers = {}
    for name, overrides in (("cold", COLD), ("warm", {"HERDR_SIM_FORKSERVER": "1"})):
        with SimServer(tmp_path / name, overrides) as sim:
            env = {**sim.env(), "HERDR_SIM_CALL_LOG": str(log)}
            herdr = sim.paths.bin / ("herdr" if name == "cold" or client == "c" else ".herdr-client.py")
            sim.add_fault("workspace create", die="after")
            sim.add_fault("workspace list", die="before")
            answers[name] = [run(herdr, ["workspace", "create", "--cwd", str(tmp_path)], env, tmp_path),
                             run(herdr, ["workspace", "list"], env, tmp_path),
                             same(run(herdr, ["workspace", "list"], env, tmp_path), sim.home)]
    assert answers["warm"] == answers["cold"]
    assert answers["cold"][:2] == [(-9, "", ""), (-9, "", "")]
    assert len(json.loads(answers["cold"][2][1])["result"]["workspaces"]) == 1  # "after": herdr had acted
    died = [(line["pid"], line["argv"][1:3], line["died"]) for line in map(json.loads, log.read_text().splitlines()) if "died" in line]
    assert died == [(os.getpid(), ["workspace", "create"], "after"), (os.getpid(), ["workspace", "list"], "before")] * 2
