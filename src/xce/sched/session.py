"""One scheduling session: real pass, catalog pass, session-end handler."""

from __future__ import annotations

import math
from collections.abc import Callable

from xce.model.result import (
    Demand,
    PendGroup,
    Preemption,
    SessionResult,
    SessionStats,
    TraceEntry,
)
from xce.sched.capacity import Capacity
from xce.sched.catalog import CatalogPass, has_jobs_to_try
from xce.sched.demand import demand, pend_groups, supply_holds, unused_supply
from xce.sched.failure import Settled
from xce.sched.idle import idle_due, idle_supply
from xce.sched.preemption import PreemptionPass, requeued_victims, resumable
from xce.sched.quiet import remember
from xce.sched.realpass import RealPass
from xce.sched.reasons import HELD, HOLD
from xce.sched.state import SchedulerState

Timer = Callable[[], float]


def run_session(
    state: SchedulerState, now: float, timer: Timer | None = None, reasons: bool = True
) -> SessionResult:
    """Decide which pending jobs start where, why the others wait, what more supply
    would let them run (demand) and what supply is idle.

    Pure: reads `state` (refreshing only its caches) and `now`; `timer`, if given, is
    used only to fill the statistics (the driver passes a clock; tests need not).
    `reasons=False` leaves the pend groups and the trace out (`pending` and `trace`
    are empty): a caller that never reads why jobs wait (a simulator run that records
    nothing) saves building them; every decision is the same. It also leaves the
    reservations out (they are booked, not named); without supply or tokens the
    first is placed only when a decision needs it (sched/realpass.py, `_lazy`).
    """
    started = timer() if timer is not None else 0.0
    cap = Capacity(state, journaled=True)  # (the state's as found once done: restore)
    try:
        return _session(state, now, cap, started, timer, reasons)
    finally:
        cap.restore()


def _session(
    state: SchedulerState, now: float, cap: Capacity, started: float, timer: Timer | None,
    reasons: bool,
) -> SessionResult:
    """run_session on the session's capacity."""
    trace: list[TraceEntry] = []
    # Jobs suspended by a preemption go on first where their preemptor has ended
    resumes = resumable(state, cap) if state.preemptions.suspended else []
    state.placed = {}  # (this session's dispatches: RealPass._dispatch)
    real = RealPass(state, cap, trace if reasons else None, now)
    real.run()
    remember(state, real, now)  # (for a next session after submissions alone)
    settled = real.settled
    preemptions: list[Preemption] = []
    victims: list[Settled] = []  # being requeued: their demand, no pend group
    if any(queue.preempt for queue in state.queues.values()):
        preempting = PreemptionPass(state, cap, real.evaluator, trace if reasons else None, now)
        settled = preempting.run(settled)
        preemptions = preempting.preemptions
        victims = requeued_victims(state, real.evaluator, preemptions)
    real_done = timer() if timer is not None else 0.0

    pending: list[PendGroup] = []
    planned = list(real.reservations)  # and, with pend reasons, the holds on supply
    found = Demand()  # nothing provisionable, or nothing that would help
    evaluated = 0
    comes_of_age = math.inf  # a job held back by its queue's demand_after
    tried = settled + victims if victims else settled
    elastic = bool(state.ranked or state.countable_pools)
    if elastic and not reasons and not has_jobs_to_try(tried):
        found = unused_supply(state)  # (the catalog pass would try nothing)
    elif elastic or reasons:
        catalog = CatalogPass(
            state, cap, real.evaluator, trace if reasons else None, now, real.holds,
            # (no planned end, before this session or of its dispatches: no earlier start)
            real.ensure_plan if state.ends or real.ends_planned else None,
        )
        outcomes = catalog.run(tried)
        found, evaluated = demand(catalog), catalog.evaluated
        comes_of_age = catalog.demand_after.due
        if reasons:
            pending = pend_groups(
                catalog, [o for o in outcomes if o[0] not in victims] if victims else outcomes
            )
            planned.extend(supply_holds(catalog, outcomes))
    catalog_done = timer() if timer is not None else 0.0

    if reasons:
        pending.extend(_held_and_waiting(state, trace))
    # Jobs whose condition can never be satisfied, to end (-ti, orphan_job_term_timeout)
    orphans, orphans_due = (
        state.waits.orphans(state, now) if state.waits.blocking else ([], math.inf)
    )
    # Hosts the plan holds for a job are not idle (sched/holds.py).
    held = real.plan.booked if real.plan is not None and state.idle_provisioned else None
    idle = idle_supply(state, now, real.dispatch, cap, held)
    # The only timers of a session: idle supply reaching its idle time, a job
    # reaching its queue's demand_after (sched/demand_after.py), and supply a hold
    # asks for once it would come in time (sched/holds_wide.py). A planned end
    # or a reservation's start is no timer: a job reaching its limit ends (an event)
    # where limits are enforced, and one running past it is re-planned at the next
    # event's session, as the reference EASY does (sessions at submit and end).
    due = min(idle_due(state, now, real.dispatch), orphans_due, comes_of_age)
    if real.holds is not None:  # (supply a hold asks for later: sched/holds_wide.py)
        due = min(due, real.holds.due)
    ended = timer() if timer is not None else 0.0
    stats = SessionStats(
        pending=len(state.pending) + len(state.held) + len(state.waiting)
        - len(real.dispatch),
        real_pass_ms=(real_done - started) * 1000,
        catalog_pass_ms=(catalog_done - real_done) * 1000,
        end_ms=(ended - catalog_done) * 1000,
        session_ms=(ended - started) * 1000,
        evaluations=real.evaluations + evaluated,
        dispatched=len(real.dispatch),
    )
    return SessionResult(
        now, real.dispatch, pending, trace, found, idle, stats, planned, due,
        real.backfilled, orphans, preemptions, resumes,
    )


def _held_and_waiting(state: SchedulerState, trace: list[TraceEntry]) -> list[PendGroup]:
    """The pend groups of held jobs and of jobs waiting for a dependency or for room
    under their array's limit (sched/waiting.py), their entries added to `trace`."""
    groups: list[PendGroup] = []
    if state.held:
        held = sorted(state.held.values(), key=lambda j: j.key)
        trace.append(TraceEntry(held[0].id, "real", "hold", HELD))
        groups.append(PendGroup(HELD, HOLD, held, [len(trace) - 1]))
    if state.waiting:
        groups.extend(state.waits.groups(state, trace))
    return groups
