"""Scenario loading of run limits (FORMATS.md "Scenario"; ARCHITECTURE.md 2a): a job's
`run_limit` reaches its JobSpec, a RUN job keeps its `start`, and a bad limit is one
ConfigError naming file, line and field."""

from __future__ import annotations

import textwrap

import pytest

from xce.config import ConfigError
from xce.model.events import JobStarted, JobSubmitted
from xce.scenario import load_scenario_text

SCENARIO_FILE = "scenario.yaml"
HEAD = """\
now: 1000
cluster:
  hosts:
    - {name: h1, slots: 8}
  queues:
    - {name: normal, run_limit: 600, max_run_limit: 7200}
jobs:
"""  # lines 1-7; jobs start on line 8


def load(jobs: str) -> tuple[dict[int, float | None], dict[int, float]]:
    """Each job's JobSpec.run_limit and each started job's start time."""
    scenario = load_scenario_text(HEAD + textwrap.dedent(jobs), SCENARIO_FILE)
    limits = {e.job.id: e.job.run_limit for e in scenario.events if isinstance(e, JobSubmitted)}
    starts = {e.job: e.time for e in scenario.events if isinstance(e, JobStarted)}
    return limits, starts


def test_job_run_limit_reaches_the_job_spec() -> None:
    limits, starts = load("""\
          - {id: 1, n: 1, run_limit: 3600}
          - {ids: "2-3", n: 1, run_limit: 90.5}
          - {id: 4, n: 1}
          - {id: 5, n: 2, state: RUN, hosts: {h1: 2}, start: 400, run_limit: 1800}
    """)
    assert limits == {1: 3600.0, 2: 90.5, 3: 90.5, 4: None, 5: 1800.0}, (
        "a job without run_limit has None (the queue's default applies in the scheduler)"
    )
    assert starts == {5: 400.0}, "a RUN job keeps its start: planned to end at 400 + 1800"


def test_queue_limits_are_read_from_an_inline_cluster() -> None:
    scenario = load_scenario_text(HEAD + "  - {id: 1}\n", SCENARIO_FILE)
    queue = scenario.config.queues[0]
    assert (queue.run_limit, queue.max_run_limit) == (600.0, 7200.0)


@pytest.mark.parametrize(
    ("jobs", "line", "field", "message"),
    [
        ("  - {id: 1, run_limit: -1}\n", 8, "jobs[0].run_limit", "run_limit must be >= 0"),
        (
            "  - {id: 1}\n  - id: 2\n    run_limit: abc\n",
            10, "jobs[1].run_limit", "expected a number, got a string ('abc')",
        ),
        (
            "  - {id: 1, run_limit: true}\n",
            8, "jobs[0].run_limit", "expected a number, got a boolean (true)",
        ),
    ],
)
def test_bad_job_run_limit_names_file_line_and_field(
    jobs: str, line: int, field: str, message: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        load_scenario_text(HEAD + jobs, SCENARIO_FILE)
    err = caught.value
    assert (err.file, err.line, err.field, err.message) == (SCENARIO_FILE, line, field, message)
    assert str(err) == f"{SCENARIO_FILE}:{line}: {field}: {message}"


@pytest.mark.parametrize(
    ("cluster", "expected"),
    [
        ("  reserve_depth: -1\n", "3: cluster.reserve_depth: reserve_depth must be >= 0"),
        (
            "  queues:\n    - {name: q, backfill: 'yes'}\n",
            "4: cluster.queues[0].backfill: expected true or false, got a string ('yes')",
        ),
    ],
)
def test_bad_cluster_key_in_a_scenario_names_the_prefixed_field(
    cluster: str, expected: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        load_scenario_text("now: 0\ncluster:\n" + cluster, SCENARIO_FILE)
    assert str(caught.value) == f"{SCENARIO_FILE}:{expected}"
