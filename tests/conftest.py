"""Shared helpers of the scenario tests: run one scheduling session on inline YAML.

`run(text)` returns the session result as the JSON object of FORMATS.md;
`session(text)` returns a `Session` that also gives pend reasons and decision traces.
"""

from __future__ import annotations

import textwrap
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import pytest
from packages import PackageError
from pg_server import PrivatePostgres

from xce.model.events import Event
from xce.model.result import SessionResult, TraceEntry
from xce.scenario import load_scenario_text
from xce.sched import run_session

SCENARIO_FILE = "scenario.yaml"


class Session:
    """One session's result, with short accessors for assertions."""

    def __init__(self, result: SessionResult) -> None:
        self.result = result
        self.json: dict[str, Any] = result.to_json_obj()

    @property
    def dispatched(self) -> dict[int, dict[str, int]]:
        """job -> {host: slots}, for every job dispatched this session."""
        return {d["job"]: d["hosts"] for d in self.json["dispatch"]}

    @property
    def dispatch_order(self) -> list[int]:
        return [d["job"] for d in self.json["dispatch"]]

    @property
    def reasons(self) -> dict[int, str]:
        """job -> pend reason (`result.reason_of`), for every pending job (held ones
        included). The JSON `pending` list is checked on its own in test_scenarios_real."""
        return {job: group.reason for group in self.result.pending for job in group.jobs}

    def reason(self, job: int) -> str | None:
        return self.result.reason_of(job)

    def trace(self, job: int) -> list[TraceEntry]:
        return self.result.trace_of(job)

    @property
    def demand(self) -> dict[str, Any]:
        return self.json["demand"]

    @property
    def idle(self) -> dict[str, Any]:
        return self.json["idle"]


def run_scenario(text: str, extra_events: Iterable[Event] = ()) -> Session:
    """Load a scenario from (indented) YAML text, apply `extra_events` after it, and
    run one session at the scenario's `now`."""
    sc = load_scenario_text(textwrap.dedent(text), SCENARIO_FILE)
    state = sc.state()
    state.apply_all(extra_events)
    return Session(run_session(state, sc.now))


@pytest.fixture
def session() -> Callable[..., Session]:
    """`session(yaml_text)` -> Session."""
    return run_scenario


@pytest.fixture
def run() -> Callable[[str], dict[str, Any]]:
    """`run(yaml_text)` -> the session result as FORMATS.md's JSON object."""
    return lambda text: run_scenario(text).json


@pytest.fixture(scope="session")
def postgres() -> Iterator[PrivatePostgres]:
    """A private PostgreSQL server for the whole test run (tests/pg_server.py:
    installed with apt-get when missing, stopped and removed at the end)."""
    try:
        server = PrivatePostgres()
    except PackageError as err:
        pytest.fail(str(err))
    yield server
    server.stop()


@pytest.fixture(params=["sqlite", "postgresql"])
def store_location(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """Where a new, empty durable log is, for `xce.controller.store.open_store`: an
    SQLite file, or a fresh database of the private PostgreSQL server (the tests that
    take it run on both stores)."""
    if request.param == "sqlite":
        return str(tmp_path / "xce.db")
    server: PrivatePostgres = request.getfixturevalue("postgres")
    return server.new_database()


# The longest test files, longest first (CI durations): pytest-xdist gives each worker
# one file at a time in collection order (`--dist loadfile`), so these start first and
# the run does not end with one worker left on a long file.
LONGEST_FILES = (
    "test_sim_sweep_traces.py",
    "test_live_elastic.py",
    "test_live_arrays_depend.py",
    "test_live_job_control.py",
    "test_live_provisioner.py",
    "test_live_cancel.py",
    "test_live_ha.py",
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    rank = {name: at for at, name in enumerate(LONGEST_FILES)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))  # (stable)
