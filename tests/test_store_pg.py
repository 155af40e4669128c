"""The PostgreSQL store's own cases (xce.controller.pg_store; the cases it shares with
SQLite are tests/test_store.py's): synchronous commit, fencing by the leader's term,
and bad input (unreachable or wrong URL, a missing database, a foreign database, a
schema from a newer release, a corrupt fact): one clear error, nothing written; the
same through `xce controller --store`, which exits non-zero."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import psycopg
import pytest
from pg_server import PrivatePostgres

from xce.controller.pg_store import Deposed, PostgresStore
from xce.controller.store import StoreError, open_store
from xce.model.events import JobKilled

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "cluster.yaml"
XCE = [sys.executable, "-c", "from xce.cli.main import main; main()"]


def contents(url: str) -> dict[str, Any]:
    """Every table of the database and its rows (what `nothing written` compares)."""
    with psycopg.connect(url) as conn:
        tables = sorted(r[0] for r in conn.execute(
            "SELECT tablename FROM pg_tables WHERE schemaname = current_schema()"))
        return {t: sorted(map(repr, conn.execute(f'SELECT * FROM "{t}"').fetchall()))
                for t in tables}


def test_commits_are_synchronous(postgres: PrivatePostgres) -> None:
    with PostgresStore(postgres.new_database()) as store:
        assert store._conn.execute("SHOW synchronous_commit").fetchone() == ("on",)
        assert store._conn.execute("SHOW fsync").fetchone() == ("on",)


def changed_after_a_fact(postgres: PrivatePostgres, change: str) -> str:
    """A new store with one fact, then `change` (SQL) made to it; its URL."""
    url = postgres.new_database()
    with open_store(url) as store:
        store.append(1.0, [JobKilled(job=1)])
    with psycopg.connect(url) as conn:
        conn.execute(change)
    return url


def test_a_deposed_term_cannot_write(postgres: PrivatePostgres) -> None:
    url = changed_after_a_fact(postgres, "UPDATE leader SET term = 2")
    before = contents(url)
    with PostgresStore(url, term=1) as old:
        with pytest.raises(Deposed, match="writes for term 1, the leader's term is now 2"):
            old.append(2.0, [JobKilled(job=2)])
        with pytest.raises(Deposed):
            old.write_snapshot(1, [])
    assert contents(url) == before
    with PostgresStore(url, term=2) as leader:
        assert leader.append(3.0, [JobKilled(job=3)]) == 2


@pytest.mark.parametrize(("url", "words"), [
    ("postgresql://xce@127.0.0.1:1/xce", "cannot connect to the store"),
    ("postgresql://xce:s3cret@127.0.0.1:notaport/xce", "cannot connect to the store"),
])
def test_unreachable_or_wrong_url(url: str, words: str) -> None:
    with pytest.raises(StoreError, match=words) as err:
        open_store(url)
    assert "s3cret" not in str(err.value)  # the password is never shown
    assert str(err.value).startswith(url.replace(":s3cret", ":***").split("?")[0])


def test_missing_database(postgres: PrivatePostgres) -> None:
    with pytest.raises(StoreError, match=r'cannot connect.*database "nowhere" does not exist'):
        open_store(postgres.url("nowhere"))


def test_foreign_database_is_refused_untouched(postgres: PrivatePostgres) -> None:
    url = postgres.new_database()
    with psycopg.connect(url) as conn:
        conn.execute("CREATE TABLE orders (id integer)")
    with pytest.raises(StoreError, match=r"not an XCE store \(a foreign database: tables "
                                         r"\['orders'\]\)"):
        open_store(url)
    assert contents(url) == {"orders": []}


def newer_schema(postgres: PrivatePostgres) -> str:
    return changed_after_a_fact(postgres, "UPDATE xce_schema SET version = 2")


def test_newer_schema_is_refused_untouched(postgres: PrivatePostgres) -> None:
    url = newer_schema(postgres)
    before = contents(url)
    with pytest.raises(StoreError, match=r"schema version 2, .*this version reads 1\) "
                                         r"\(written by a newer xce: upgrade xce\)"):
        open_store(url)
    assert contents(url) == before


# ---------------------------------------------------------------- xce controller --store
def run_controller(tmp_path: Path, store: str) -> subprocess.CompletedProcess[str]:
    state = tmp_path / "state"
    if not state.exists():
        subprocess.run([*XCE, "init", "--state", str(state)], check=True, capture_output=True)
    return subprocess.run(
        [*XCE, "controller", "--config", str(EXAMPLE), "--state", str(state),
         "--listen", "127.0.0.1:0", "--store", store],
        capture_output=True, text=True, timeout=60)


def test_controller_refuses_a_bad_store(tmp_path: Path, postgres: PrivatePostgres) -> None:
    newer = newer_schema(postgres)
    before = contents(newer)
    cases = {
        "postgresql://xce@127.0.0.1:1/xce": "cannot connect to the store",
        "mysql://xce@127.0.0.1/xce": "--store mysql://xce@127.0.0.1/xce: expected a "
                                     "postgresql:// URL",
        newer: "written by a newer xce: upgrade xce",
    }
    for url, words in cases.items():
        done = run_controller(tmp_path, url)
        assert done.returncode == 1, (url, done.stderr)
        errors = [line for line in done.stderr.splitlines() if line.startswith("Error:")]
        assert len(errors) == 1 and words in errors[0], (url, done.stderr)
        assert not (tmp_path / "state" / "controller.url").exists()
        assert not (tmp_path / "state" / "xce.db").exists()  # no SQLite store made instead
    assert contents(newer) == before
