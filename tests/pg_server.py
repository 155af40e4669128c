"""A private PostgreSQL server for the tests and the benchmarks: Debian's postgresql
(installed with apt-get when `initdb` is missing), a fresh cluster (`initdb`) in a
temporary directory, started with `pg_ctl` on a free loopback port with its unix socket
in that directory, and stopped (and removed) at the end.

As root the server runs as the `postgres` user (made when missing): PostgreSQL refuses
to run as root. `PrivatePostgres().dsn` is the URL of its `postgres` database, superuser
`xce`, trust authentication on loopback only; `new_database()` makes an empty database
and returns its URL (each test gets its own).
"""

from __future__ import annotations

import contextlib
import glob
import itertools
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path

from packages import PackageError, apt_install

PACKAGES = ("postgresql",)
SERVER_USER = "postgres"


def server_bin() -> Path:
    """The directory of `initdb` and `pg_ctl` (postgresql installed when missing)."""
    for attempt in range(2):
        found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
        if found:
            return Path(found[-1]).parent
        if shutil.which("initdb"):
            return Path(str(shutil.which("initdb"))).parent
        if attempt == 0:
            apt_install(PACKAGES)
    raise PackageError("installed postgresql, but initdb is still not found")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class PrivatePostgres:
    """A PostgreSQL server of its own in a temporary directory (see the module doc)."""

    def __init__(self, fsync: bool = True) -> None:
        self.bin = server_bin()
        self.dir = Path(tempfile.mkdtemp(prefix="xce-pg-"))
        self.data = self.dir / "data"
        self.port = _free_port()
        self._names = itertools.count(1)
        self._as: list[str] = []
        if os.geteuid() == 0:  # the server refuses to run as root
            _ensure_user(SERVER_USER)
            owner = pwd.getpwnam(SERVER_USER)
            os.chown(self.dir, owner.pw_uid, owner.pw_gid)
            self._as = ["runuser", "-u", SERVER_USER, "--"]
        self._run("initdb", "-D", str(self.data), "-U", "xce", "--auth=trust",
                  "--encoding=UTF8", "--no-instructions")
        options = (f"-c listen_addresses=127.0.0.1 -c port={self.port} "
                   f"-c unix_socket_directories={self.dir} -c fsync={'on' if fsync else 'off'} "
                   "-c max_connections=200 -c shared_buffers=128MB")
        self._run("pg_ctl", "-D", str(self.data), "-l", str(self.dir / "server.log"),
                  "-o", options, "-w", "-t", "60", "start")
        self.dsn = self.url("postgres")

    def url(self, database: str) -> str:
        return f"postgresql://xce@127.0.0.1:{self.port}/{database}"

    def new_database(self, prefix: str = "xce") -> str:
        """A new, empty database; its URL."""
        import psycopg

        name = f"{prefix}_{next(self._names)}"
        with psycopg.connect(self.dsn, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return self.url(name)

    def _run(self, tool: str, *args: str) -> None:
        done = subprocess.run([*self._as, str(self.bin / tool), *args], capture_output=True,
                              text=True, timeout=120)
        if done.returncode != 0:
            log = self.dir / "server.log"
            tail = log.read_text()[-2000:] if log.exists() else ""
            raise RuntimeError(f"{tool} {' '.join(args)} failed ({done.returncode}):\n"
                               f"{done.stdout[-2000:]}\n{done.stderr[-2000:]}\n{tail}")

    def stop(self) -> None:
        with contextlib.suppress(RuntimeError, subprocess.TimeoutExpired):
            self._run("pg_ctl", "-D", str(self.data), "-m", "immediate", "-w", "stop")
        shutil.rmtree(self.dir, ignore_errors=True)


def _ensure_user(name: str) -> None:
    try:
        pwd.getpwnam(name)
    except KeyError:
        subprocess.run(["useradd", "--system", "--no-create-home", name], check=True)
