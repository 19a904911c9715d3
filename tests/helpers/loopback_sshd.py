"""A real OpenSSH server on 127.0.0.1 for one test: throwaway host and client keys, its own config, one host alias.

``LoopbackSshd(tmp, env={...}).start()`` runs ``sshd -D`` on a free port, logging in only the current user by key,
with ``env`` set for every session (sshd_config ``SetEnv``: what the "remote" host's shell sees). ``bin_dir`` holds an
`ssh` that is the real client with this test's config (``-F``), so orch's ordinary ``ssh … orch-box -- CMD`` reaches
it; ``stop()`` kills the server (a host that went away), ``serve()`` brings it back on the same port. Nothing outside the temp dir is touched, except sshd's
privilege-separation directory ``/run/sshd`` when running as root, created only if missing and removed again.
"""

from __future__ import annotations

import os
import pwd
import shutil
import socket
import subprocess
from pathlib import Path

from herdr_sim.testing import eventually

SSHD = shutil.which("sshd") or "/usr/sbin/sshd"
ALIAS = "orch-box"


def available() -> bool:
    """Whether an sshd and the ssh client are installed."""
    return Path(SSHD).is_file() and shutil.which("ssh") is not None and shutil.which("ssh-keygen") is not None


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class LoopbackSshd:
    """One sshd on 127.0.0.1, reached as the ssh_config alias ``orch-box`` through ``bin_dir/ssh``."""

    def __init__(self, root: Path, env: dict[str, str]) -> None:
        self.root = root
        self.env = env
        self.port = _free_port()
        self.bin_dir = root / "bin"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> LoopbackSshd:
        """Write keys and configs, start sshd, and wait until it accepts connections."""
        self.root.mkdir(parents=True, exist_ok=True)
        for name in ("host", "client"):
            subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(self.root / name)], check=True, timeout=30)
        (self.root / "authorized_keys").write_text((self.root / "client.pub").read_text())
        host_key = (self.root / "host.pub").read_text().split()
        (self.root / "known_hosts").write_text(f"[127.0.0.1]:{self.port} {host_key[0]} {host_key[1]}\n")
        user = pwd.getpwuid(os.getuid()).pw_name
        set_env = " ".join(f'"{key}={value}"' for key, value in self.env.items())
        (self.root / "sshd_config").write_text(
            f"Port {self.port}\nListenAddress 127.0.0.1\nHostKey {self.root / 'host'}\nPidFile {self.root / 'sshd.pid'}\n"
            f"AuthorizedKeysFile {self.root / 'authorized_keys'}\nAllowUsers {user}\nPermitRootLogin prohibit-password\n"
            "PasswordAuthentication no\nKbdInteractiveAuthentication no\nUsePAM no\nStrictModes no\nLogLevel ERROR\n"
            + (f"SetEnv {set_env}\n" if set_env else "")
        )
        (self.root / "ssh_config").write_text(
            f"Host {ALIAS}\n  HostName 127.0.0.1\n  Port {self.port}\n  User {user}\n  IdentityFile {self.root / 'client'}\n"
            f"  IdentitiesOnly yes\n  UserKnownHostsFile {self.root / 'known_hosts'}\n  StrictHostKeyChecking yes\n  LogLevel ERROR\n"
        )
        self.bin_dir.mkdir(exist_ok=True)
        wrapper = self.bin_dir / "ssh"
        wrapper.write_text(f'#!/bin/sh\nexec {shutil.which("ssh")} -F {self.root / "ssh_config"} "$@"\n')
        wrapper.chmod(0o755)
        return self.serve()

    def serve(self) -> LoopbackSshd:
        """Run sshd with the config ``start`` wrote (again, after ``stop``: the host comes back on the same port)."""
        privsep = Path("/run/sshd")
        if os.geteuid() == 0 and not privsep.exists():
            # sshd's privilege-separation directory, shared by every sshd of the machine. It is left in place when
            # the test ends: removed under another test's running sshd (xdist), every new connection there was
            # reset (`kex_exchange_identification: read: Connection reset by peer`), a flaky HostUnreachable.
            privsep.mkdir(mode=0o755, exist_ok=True)
        with open(self.root / "sshd.log", "ab") as log:  # Popen keeps its own copy of the descriptor
            self.proc = subprocess.Popen([SSHD, "-D", "-e", "-f", str(self.root / "sshd_config")], stdout=subprocess.DEVNULL,
                                         stderr=log, start_new_session=True)
        proc = self.proc

        def listening() -> bool:
            if proc.poll() is not None:
                raise RuntimeError(f"sshd did not start: {(self.root / 'sshd.log').read_text(errors='replace')}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1):
                    return True
            except OSError:
                return False

        eventually(listening, "sshd listening on 127.0.0.1", timeout_s=15, interval_s=0.05)
        return self

    def stop(self) -> None:
        """Kill the server (the host goes away); idempotent."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=10)
