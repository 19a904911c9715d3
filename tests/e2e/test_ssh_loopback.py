"""orch's ssh transport through a real OpenSSH server on 127.0.0.1 (issue 26): every word of free text reaches the
remote process as it was, a host's own herdr answers over it, and a host that went away is unreachable (exit 255,
HostUnreachable), never a failed command."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from loopback_sshd import ALIAS, LoopbackSshd, available

from herdr_sim import versions
from herdr_sim.testing import SimServer
from orchestrator.errors import HostUnreachable
from orchestrator.herdr import HerdrCli, RetryPolicy
from orchestrator.remote import run_remote
from tests.orchestrator.test_remote import HOSTILE

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(not available(), reason="no sshd here: `apt-get install -y openssh-server` (.ci/run installs it)"),
]


@pytest.fixture
def box(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[LoopbackSshd, SimServer]]:
    """The build box: a simulated herdr in session acme, whose environment every ssh session on the loopback sshd gets."""
    home = Path(f"/tmp/orch-e2e-sshd-{abs(hash(str(tmp_path))) % 10**8}")  # socket paths must stay short
    with SimServer(home, session="acme") as sim:
        env = {"PATH": f"{sim.paths.bin}:/usr/local/bin:/usr/bin:/bin", "HERDR_SIM_HOME": str(sim.home),
               "HERDR_SOCKET_PATH": str(sim.paths.socket_for("acme")), "HERDR_SESSION": "acme",
               "HERDR_SIM_VERSION": versions.current().name}
        server = LoopbackSshd(tmp_path / "sshd", env).start()
        monkeypatch.setenv("PATH", f"{server.bin_dir}:{os.environ['PATH']}")
        try:
            yield server, sim
        finally:
            server.stop()
    shutil.rmtree(home, ignore_errors=True)


def test_free_text_crosses_a_real_sshd_word_for_word(box: tuple[LoopbackSshd, SimServer]) -> None:
    result = run_remote(ALIAS, ["printf", "%s\\0", *HOSTILE])

    assert (result.returncode, result.stderr) == (0, "")
    assert result.stdout.split("\0")[:-1] == HOSTILE


def test_a_hosts_own_herdr_answers_over_ssh_and_a_host_gone_is_unreachable(box: tuple[LoopbackSshd, SimServer]) -> None:
    server, sim = box
    cli = HerdrCli("herdr", ssh=ALIAS, retry=RetryPolicy(read_attempts=1))

    assert cli.version().text == f"herdr {versions.current().version}"
    # The same answer the box's herdr gives a client on the box itself (paths aside: sshd sets HOME from the account).
    on_box = HerdrCli(str(sim.paths.bin / "herdr"), env=sim.env()).integration_status()
    assert [(e.target, e.state) for e in cli.integration_status()] == [(e.target, e.state) for e in on_box]

    server.stop()
    gone = run_remote(ALIAS, ["true"])
    with pytest.raises(HostUnreachable) as caught:
        cli.version()

    assert (gone.returncode, gone.unreachable) == (255, True)
    assert caught.value.message.startswith(f"ssh {ALIAS} herdr --version: ssh failed: ")
    assert caught.value.exit_code == 3
