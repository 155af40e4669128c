"""XCE's simulator decides every start as the independent EASY reference does, job by
job, on random small workloads (ARCHITECTURE.md section 2a; bench/easy_reference.py).

test_easy_reference.py compares the two on real traces by their figures; this test
draws workloads made to hit the corners: submissions and ends at the same second,
jobs that run past their limit (planned to end one second from now), jobs without a
limit, limits equal to the run, head jobs that can never get a reservation, machines
of 1 to 12 one-slot hosts; limits enforced or not. Both read the same SWF records;
every job must start at the same second in both.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from easy_setup import easy, easy_cluster, swf_text
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from xce.config import load_config_text
from xce.sim.driver import Simulator
from xce.sim.workload import load_workload

Row = tuple[int, int, int, int]  # submit, run, processors, requested time (-1: none)


def swf(processors: int, rows: list[Row]) -> str:
    return swf_text(processors, [(i, *row) for i, row in enumerate(rows, start=1)])


def xce_starts(processors: int, path: Path, enforce: bool, first: float) -> dict[int, float]:
    """Each job's start, on the trace's clock (XCE's starts at the `first` submit)."""
    sim = Simulator(load_config_text(easy_cluster(processors, enforce), "easy.yaml"),
                    load_workload(path), reasons=False)
    sim.run()
    return {job: first + start for job, start in sim.metrics.started.items()}


def compare(processors: int, rows: list[Row], enforce: bool) -> None:
    """With `enforce`, XCE ends each job at its limit; the reference, which never
    does, is given the runs so cut."""
    with tempfile.TemporaryDirectory() as tmp:
        path, cut = Path(tmp) / "random.swf", Path(tmp) / "cut.swf"
        path.write_text(swf(processors, rows))
        cut.write_text(swf(processors, [
            (s, min(r, q) if enforce and q > 0 else r, p, q) for s, r, p, q in rows
        ]))
        expected = easy.simulate(easy.read_swf(str(cut))).starts
        got = xce_starts(processors, path, enforce, min(row[0] for row in rows))
    assert got == expected, "\n".join(
        f"job {job} {rows[job - 1]}: reference {expected.get(job)}, XCE {got.get(job)}"
        for job in sorted(set(expected) | set(got)) if expected.get(job) != got.get(job)
    )


@st.composite
def workloads(draw: st.DrawFn) -> tuple[int, list[Row]]:
    processors = draw(st.integers(1, 12))
    count = draw(st.integers(1, 30))
    submit, rows = 0, []
    for _ in range(count):
        submit += draw(st.sampled_from([0, 0, 1, 2, 5, 17]))
        run = draw(st.integers(1, 40))
        limit = draw(st.sampled_from([-1, run, run + 1, run - 1, 5, 20, 60]))
        rows.append((submit, run, draw(st.integers(1, processors)), limit if limit else -1))
    return processors, rows


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(workload=workloads(), enforce=st.booleans())
@example(workload=(5, [(0, 100, 3, 100), (1, 100, 5, 100), (2, 50, 1, 50), (3, 10, 1, 200),
                       (4, 10, 1, -1)]), enforce=False)
def test_every_job_starts_when_the_reference_starts_it(
    workload: tuple[int, list[Row]], enforce: bool
) -> None:
    compare(*workload, enforce)
