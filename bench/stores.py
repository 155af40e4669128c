"""Where a benchmark keeps its durable logs (`--store`): SQLite files (the default), or
fresh databases on PostgreSQL: a private server this script starts and stops
(`postgresql`: tests/pg_server.py, in the system temp directory, fsync on) or the server
of a given URL (`postgresql://USER@HOST:PORT/DB`: a new database on it per log)."""

from __future__ import annotations

import itertools
import sys
from pathlib import Path
from urllib.parse import urlsplit

import psycopg

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from pg_server import PrivatePostgres

HELP = ("sqlite (default), postgresql (a private server started by the benchmark) or "
        "postgresql://USER@HOST:PORT/DB (new databases on that server)")


class Stores:
    """New durable logs of one kind (see the module doc)."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self.server: PrivatePostgres | None = None
        self._names = itertools.count(1)
        if kind == "postgresql":
            self.server = PrivatePostgres()
            self.admin = self.server.dsn
        elif kind.startswith("postgresql://"):
            self.admin = kind
        elif kind != "sqlite":
            raise SystemExit(f"--store {kind}: expected {HELP}")

    @property
    def postgres(self) -> bool:
        return self.kind != "sqlite"

    def new(self, state: Path) -> str:
        """A new, empty log for a controller whose state directory is `state`."""
        if not self.postgres:
            state.mkdir(parents=True, exist_ok=True)
            return str(state / "xce.db")
        name = f"xce_bench_{next(self._names)}_{state.name}".lower()
        with psycopg.connect(self.admin, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}"')
            conn.execute(f'CREATE DATABASE "{name}"')
        return urlsplit(self.admin)._replace(path=f"/{name}").geturl()

    def controller_args(self, location: str) -> tuple[str, ...]:
        """What `xce controller` takes to use the log at `location`."""
        return ("--store", location) if self.postgres else ()

    def size_mb(self, location: str) -> float:
        if not self.postgres:
            return Path(location).stat().st_size / 1e6
        with psycopg.connect(location) as conn:
            row = conn.execute("SELECT pg_database_size(current_database())").fetchone()
        return float(row[0]) / 1e6 if row else 0.0

    def describe(self) -> str:
        if self.server is not None:
            return f"PostgreSQL (private server, fsync on, {self.server.dsn})"
        return "PostgreSQL " + self.admin if self.postgres else "SQLite (WAL, synchronous=FULL)"

    def close(self) -> None:
        if self.server is not None:
            self.server.stop()
