"""A reservation on one-slot hosts takes the first hosts by name that are free by its
start (sched/earliest.py `_first_hosts`): the same hosts as the general placement.

Two states are fed the same events; in the second, `widest` says hosts have had two
slots, which sends every placement through the general path (candidates, ranking,
spread). Sessions with pend reasons name their reservations' hosts: those, the
dispatches and the backfilled jobs must be equal.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest
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
        st.sampled_from([None, 20, 60, 150, 400, 30.5]),
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
@given(FEW, st.booleans(), st.sampled_from([1, 2]), st.booleans())
def test_reservations_when_few_hosts_are_free_by_the_start(
    rows: list[Row], backfill: bool, depth: int, reasons: bool
) -> None:
    """Also in lean sessions, where a job behind the reservation takes the first free
    hosts past its hosts (sched/plan.py `_first_unclaimed`, by index: the hosts are
    numbered in name order)."""
    placements = Placements(cluster(64, backfill=backfill, depth=depth), reasons=reasons)
    assert placements.fast.indexed_labels
    replay(placements, workload(rows))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(FEW, st.booleans(), st.sampled_from([1, 2]), st.booleans())
def test_few_hosts_free_numbered_out_of_name_order(
    rows: list[Row], backfill: bool, depth: int, reasons: bool
) -> None:
    """The same on hosts configured out of name order: sorted by label, not index."""
    placements = Placements(
        cluster(64, backfill=backfill, depth=depth).replace(
            '- {name: "h[001-064]", slots: 1}',
            '- {name: "h[033-064]", slots: 1}\n  - {name: "h[001-032]", slots: 1}',
        ),
        reasons=reasons,
    )
    assert not placements.fast.indexed_labels and placements.fast.names[0] == "h033"
    replay(placements, workload(rows))


@dataclass
class Recorded(Placements):
    dispatched: dict[int, dict[str, int]] = field(default_factory=dict)

    def session(self, now: float) -> list[tuple[int, dict[str, int]]]:
        started = super().session(now)
        self.dispatched.update(started)
        return started


OUT_OF_ORDER = ('- {name: "h[001-080]", slots: 1}',
                '- {name: "h[041-080]", slots: 1}\n  - {name: "h[001-040]", slots: 1}')


@pytest.mark.parametrize("numbered_in_order", [True, False])
def test_a_job_behind_the_reservation_takes_the_first_free_host_past_its_hosts(
    numbered_in_order: bool,
) -> None:
    """80 one-slot hosts: jobs on h001-h040 (to 1000), h041 (to 10) and h042-h078; a
    40-host job reserves h001-h040 from 1000; h041 frees at 10; a long one-host job
    then takes h041, the first free host past the reservation's last (three hosts
    free: sorted, not walked, from there: sched/plan.py `_first_unclaimed`)."""
    text = cluster(80)
    if not numbered_in_order:
        text = text.replace(*OUT_OF_ORDER)
    placements = Recorded(text, reasons=False)
    assert placements.fast.indexed_labels == numbered_in_order
    rows: list[Row] = [(0, 1000, 40, 1000, "normal", 0), (0, 10, 1, 10, "normal", 0),
                       (0, 2000, 37, 2000, "normal", 0), (5, 3000, 40, 3000, "normal", 0),
                       (10, 5000, 1, 5000, "normal", 0)]
    replay(placements, workload(rows))
    assert placements.dispatched[2] == {"h041": 1}
    assert placements.dispatched[5] == {"h041": 1}


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
