"""A reservation on one-slot hosts takes the first hosts by name that are free by its
start (sched/earliest.py `_first_hosts`): the same hosts as the general placement.

Two states are fed the same events; in the second, `widest` says hosts have had two
slots, which sends every placement through the general path (candidates, ranking,
spread). Sessions with pend reasons name their reservations' hosts: those, the
dispatches and the backfilled jobs must be equal.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_quiet import JOBS, Row, cluster, replay, workload

from xce.config import load_config_text
from xce.model.events import JobStarted, SchedulerEvent
from xce.sched.session import run_session
from xce.sched.state import SchedulerState

# On 64 hosts: wide jobs fill the machine, and a narrow job blocked behind them finds
# fewer than 8 hosts free by its start (`_first_hosts` sorts those instead of walking
# every host).
FEW = st.lists(
    st.tuples(
        st.integers(0, 40), st.integers(1, 200), st.sampled_from([1, 2, 3, 5, 7, 30, 50]),
        st.sampled_from([None, 20, 60, 150, 400]),
        st.sampled_from(["normal", "normal", "normal", "high"]), st.sampled_from([0, 0, 3]),
    ),
    min_size=1, max_size=40,
)


@dataclass
class Placements:
    """`fast` places reservations on one-slot hosts by name, `general` as on any hosts."""

    config: str
    # False: sessions without pend reasons, as the simulator's (a reservation there
    # may be found without placing it: `earliest_start(place=False)`)
    reasons: bool = True
    fast: SchedulerState = field(init=False)
    general: SchedulerState = field(init=False)

    def __post_init__(self) -> None:
        loaded = load_config_text(self.config, "first.yaml")
        self.fast, self.general = SchedulerState(loaded), SchedulerState(loaded)
        self.general.widest = 2

    def apply(self, event: SchedulerEvent) -> None:
        self.fast.apply(event)
        self.general.apply(event)

    def session(self, now: float) -> list[tuple[int, dict[str, int]]]:
        a = run_session(self.fast, now, reasons=self.reasons)
        b = run_session(self.general, now, reasons=self.reasons)
        assert a.dispatch == b.dispatch, now
        assert a.backfilled == b.backfilled, now
        assert a.reservations == b.reservations, now
        assert a.next_due == b.next_due, now
        for d in a.dispatch:
            self.apply(JobStarted(job=d.job, hosts=d.hosts, time=now))
        return [(d.job, d.hosts) for d in a.dispatch]


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(JOBS, st.booleans(), st.sampled_from([1, 2]))
def test_reservations_on_one_slot_hosts_take_the_hosts_the_general_placement_takes(
    rows: list[Row], backfill: bool, depth: int
) -> None:
    replay(Placements(cluster(6, backfill=backfill, depth=depth)), workload(rows))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(FEW, st.booleans(), st.sampled_from([1, 2]))
def test_reservations_when_few_hosts_are_free_by_the_start(
    rows: list[Row], backfill: bool, depth: int
) -> None:
    replay(Placements(cluster(64, backfill=backfill, depth=depth)), workload(rows))


def restricted_cluster(backfill: bool, depth: int) -> str:
    """Twelve one-slot hosts; queue `high` runs on six of them, not in a row: a job
    that reserves there waits for ends of jobs that hold other hosts too."""
    return (
        "cluster: restricted\n"
        f"reserve_depth: {depth}\n"
        "hosts:\n"
        '  - {name: "h[001-012]", slots: 1}\n'
        "queues:\n"
        f"  - {{name: normal, priority: 30, backfill: {str(backfill).lower()}}}\n"
        f"  - {{name: high, priority: 50, backfill: {str(backfill).lower()},\n"
        "     hosts: [h002, h003, h005, h007, h011, h012]}\n"
    )


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(JOBS, st.booleans(), st.sampled_from([1, 2]))
def test_reservations_on_part_of_the_hosts(
    rows: list[Row], backfill: bool, depth: int
) -> None:
    """Ends of jobs on hosts a reserving job may not use add none of their slots
    (`earliest_start` counts a whole job's hosts at once only where all are eligible)."""
    replay(Placements(restricted_cluster(backfill, depth)), workload(rows))


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(JOBS, st.booleans(), st.sampled_from([1, 2]))
def test_lean_sessions_on_part_of_the_hosts(
    rows: list[Row], backfill: bool, depth: int
) -> None:
    replay(Placements(restricted_cluster(backfill, depth), reasons=False), workload(rows))
