"""XCE's simulator against the independent EASY reference (issue 17, "Against an
independent EASY"; ARCHITECTURE.md section 2a).

The reference is bench/easy_reference.py: one 1-slot host per processor, FCFS, every
job backfills, reserve_depth 1, sessions at every submit and end, limits from the
trace (SWF field 9) and not enforced. XCE runs the same setup (one queue with
`backfill: true`, `reserve_depth: 1`, `session_interval: 1`,
`simulation: {enforce_run_limits: false}`) on the first 2,000 jobs of SDSC-SP2 and
KTH-SP2: mean wait and mean bounded slowdown within 10 % of the reference's, the
longest wait of wide jobs (at least a quarter of the machine) at most 1.25 x its.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from easy_setup import easy, easy_cluster, swf_text

from xce.config import load_config_text
from xce.sim.driver import Simulator
from xce.sim.workload import load_workload, transform

TRACES = Path(__file__).resolve().parents[2] / "shared" / "traces"
FIRST = 2_000


@pytest.mark.skipif(not TRACES.is_dir(), reason="no shared traces beside the repository")
@pytest.mark.parametrize("name", ["SDSC-SP2-1998-4.2-cln", "KTH-SP2-1996-2.1-cln"])
def test_xce_easy_is_close_to_the_reference(name: str) -> None:
    path = TRACES / f"{name}.swf.gz"
    ref = easy.simulate(easy.read_swf(str(path), FIRST))
    config = load_config_text(easy_cluster(easy.machine_size(str(path))), "easy.yaml")
    sim = Simulator(config, transform(load_workload(path), first=FIRST), reasons=False)
    sim.run()
    summary = sim.summary()
    assert summary["jobs"] - summary["too_large"] == ref.jobs
    wait, bsld = summary["wait_mean"], summary["bsld_mean"]
    wide = summary.get("wide_wait_max")  # FORMATS.md, "Simulator summary"
    figures = (f"XCE wait mean {wait:,.0f} s, bsld {bsld:.1f}, wide wait max {wide} s; "
               f"reference {ref.wait_mean:,.0f} s, {ref.bsld_mean:.1f}, "
               f"{ref.wide_wait_max:,.0f} s")
    assert abs(wait / ref.wait_mean - 1) <= 0.10, figures
    assert abs(bsld / ref.bsld_mean - 1) <= 0.10, figures
    assert wide is not None, f"the summary has no wide_wait_max; {figures}"
    assert wide <= 1.25 * ref.wide_wait_max, figures

def test_reference_holds_the_head_jobs_hosts_and_backfills_short_jobs(tmp_path: Path) -> None:
    """Five hosts. Job 1 (3 processors) runs 0-100. Job 2 (5) is blocked at 1 and
    reserves every host from 100. Job 3 (1, limit 50) fits before that on h0004 and
    starts at 2; job 4 (limit 200) and job 5 (no limit) would run into the reservation
    and wait for job 2 to end at 200."""
    rows = [  # id, submit, run, procs, requested time
        (1, 0, 100, 3, 100), (2, 1, 100, 5, 100), (3, 2, 50, 1, 50),
        (4, 3, 10, 1, 200), (5, 4, 10, 1, -1),
        (6, 5, 10, 6, 10),  # wider than the machine: skipped
        (7, 6, 0, 1, 10),  # no run time: skipped
    ]
    trace = tmp_path / "tiny.swf"
    trace.write_text(swf_text(5, rows))
    result = easy.simulate(easy.read_swf(str(trace)))
    assert result.starts == {1: 0, 2: 100, 3: 2, 4: 200, 5: 200}
    assert result.skipped == 2
    assert result.wide_wait_max == 99  # job 2: 5 processors, submitted at 1
