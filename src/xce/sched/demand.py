"""The session-end handler's demand: what the catalog pass placed, added up per
template and per pool, with the pend reasons of the jobs that wait for it."""

from __future__ import annotations

from collections.abc import Sequence

import msgspec

from xce.model.result import (
    Demand,
    HostDemand,
    PendGroup,
    Reservation,
    ResourceDemand,
    SurplusHosts,
    SurplusTokens,
)
from xce.sched.buckets import Bucket, PendingJob
from xce.sched.catalog import CatalogPass, Outcome, Placed
from xce.sched.realpass import Failure, Settled
from xce.sched.reasons import PROVISIONING, RESERVED, RESOURCE, plural, reserved_and
from xce.sched.served import SERVED
from xce.sched.state import SchedulerState


def waiting_reason(placed: Placed) -> str:
    """The pend reason of a job that waits for provisioned supply."""
    parts: list[str] = []
    supply = placed.template
    if supply is not None:
        if placed.new_hosts:
            detail = f"{plural(supply.new, 'new host')} requested this session"
        else:
            detail = f"{plural(supply.in_flight_total, 'host')} in flight"
        parts.append(
            f"Waiting for provisioning: fits on template {supply.template.name} ({detail})"
        )
        if placed.joined:
            held = plural(sum(placed.joined.values()), "slot")
            if placed.static:  # (free static hosts too: sched/holds_real.py)
                where = f"{plural(len(placed.joined), 'host')} ({placed.static} static)"
            else:
                where = plural(len(placed.joined), "joined host")
            parts.append(f"holds {held} on {where}")
    for use in placed.tokens:
        if use.short <= 0:
            continue
        if use.from_headroom > 0:
            tail = f"headroom {use.pool.available_headroom():g}"
        else:
            tail = f"{use.pool.tokens_in_flight:g} in flight"
        if parts:
            parts.append(f"short {use.short:g} of {use.pool.label} ({tail})")
        else:
            parts.append(
                f"Short {use.short:g} of {use.pool.label}; waiting for provisioning ({tail})"
            )
    return "; ".join(parts)


def pend_groups(
    catalog: CatalogPass, outcomes: list[tuple[Settled, Sequence[PendingJob], Outcome]]
) -> list[PendGroup]:
    """Pend groups for the buckets the real pass settled on resources, after the
    catalog pass: jobs waiting for provisioning get their own reasons."""
    # Each settled bucket with one outcome for all its jobs (nothing placed or held
    # at a limit on its own): one group each, nothing to merge.
    one_each = catalog.one_each
    each: list[PendGroup] = []
    groups: dict[tuple[Bucket, str], PendGroup] = {}
    reopened: set[tuple[Bucket, str]] = set()  # groups that got members in several runs
    # Reasons of jobs placed on a template without tokens: one per (template, new hosts)
    waiting: dict[tuple[int, bool], str] = {}
    for settled, members, outcome in outcomes:
        if isinstance(outcome, Placed):
            if outcome.tokens or outcome.template is None or outcome.joined:
                reason = waiting_reason(outcome)
            else:
                shared = (id(outcome.template), outcome.new_hosts)
                found = waiting.get(shared)
                if found is None:
                    found = waiting[shared] = waiting_reason(outcome)
                reason = found
            kind = PROVISIONING
        elif isinstance(outcome, Failure):
            reason, kind = outcome.reason, outcome.kind
            if (
                kind == RESOURCE and outcome.check != SERVED
                and settled.failure.reason.startswith(RESERVED)
            ):
                # A reserved job no supply could start sooner: its reservation first.
                reason = reserved_and(settled.failure.reason, reason)
        else:
            reason, kind = settled.failure.reason, settled.failure.kind
        # (a fairshare queue's: first why its user comes after another, sched/share_order.py)
        traced = (
            [settled.trace] if settled.bucket.share_trace < 0
            else [settled.bucket.share_trace, settled.trace]
        )
        if one_each:
            each.append(
                PendGroup(reason, kind, members, traced, catalog.trace_runs(settled.bucket))
            )
            continue
        key = (settled.bucket, reason)
        group = groups.get(key)
        if group is None:
            # The members list is the pass's own slice: the group takes it over.
            groups[key] = PendGroup(
                reason, kind, members, traced, catalog.trace_runs(settled.bucket)
            )
            continue
        if members:
            if key not in reopened:
                group.members = list(group.members)
                reopened.add(key)
            assert isinstance(group.members, list)
            group.members.extend(members)
    # A bucket's jobs may come back in several runs: keep each group in job order.
    for key in reopened:
        members_list = groups[key].members
        assert isinstance(members_list, list)
        members_list.sort(key=lambda m: m.key)
    return each if one_each else list(groups.values())


def demand(catalog: CatalogPass) -> Demand:
    """Per template the new hosts and in-flight hosts used; per pool the tokens to
    borrow and in-flight tokens used; each with its jobs in scheduling order."""
    hosts = [
        HostDemand(s.template.name, s.new, len(s.expected), s.jobs)
        for s in catalog.templates
        if s.jobs
    ]
    resources = [
        ResourceDemand(t.pool.label, t.from_headroom, t.from_in_flight, t.jobs)
        for t in catalog.tokens.values()
        if t.jobs
    ]
    surplus_hosts = [
        SurplusHosts(s.template.name, s.in_flight)
        for s in catalog.templates
        if s.in_flight > 0
    ]
    surplus_tokens = [
        SurplusTokens(t.pool.label, t.in_flight)
        for t in catalog.tokens.values()
        if t.in_flight > 0
    ]
    return Demand(hosts, resources, surplus_hosts, surplus_tokens)


def unused_supply(state: SchedulerState) -> Demand:
    """The demand of a session whose catalog pass has no job to try (no job failed on
    resources): nothing is asked for, and every host and token in flight is surplus
    (what `demand` finds of a catalog pass that placed nothing, without making one:
    most sessions of elastic simulations, bench_traces.py)."""
    in_flight = state.in_flight
    surplus_hosts = []
    for template in state.ranked:
        count = in_flight.get(template.name, 0)
        if count > 0:
            surplus_hosts.append(SurplusHosts(template.name, count))
    surplus_tokens = [
        SurplusTokens(pool.label, pool.tokens_in_flight)
        for pool in state.countable_pools
        if pool.tokens_in_flight > 0
    ]
    return Demand([], [], surplus_hosts, surplus_tokens)


def supply_holds(
    catalog: CatalogPass, outcomes: list[tuple[Settled, Sequence[PendingJob], Outcome]]
) -> list[Reservation]:
    """The reservations of jobs placed on hosts of a template (ARCHITECTURE.md 2a,
    "Elastic"): from when all their hosts are expected, on the joined hosts they hold
    (by name) and `<template>:virtual` for the slots on hosts still to come."""
    names = catalog.state.names
    found: list[Reservation] = []
    holds = catalog.holds
    held = holds.held if holds is not None else {}
    later = holds.later if holds is not None else {}
    for settled, members, outcome in outcomes:
        if not isinstance(outcome, Placed) or outcome.template is None:
            # A job holding joined hosts that the rest of its supply cannot reach
            # still holds them this session (the real pass booked them); one wider
            # than its template's max that asks for the rest later holds its real
            # hosts, the rest to come (sched/holds_wide.py).
            for job in members if held or later else ():
                hold = held.get(job.id)
                if hold is not None:
                    found.append(msgspec.structs.replace(hold.booked, virtual=True))
                    continue
                hold = later.get(job.id)
                if hold is not None:
                    hosts = dict(hold.booked.hosts)
                    hosts[f"{hold.template.name}:virtual"] = hold.rest
                    found.append(msgspec.structs.replace(hold.booked, hosts=hosts, virtual=True))
            continue
        joined = outcome.joined
        hosts = {names[index]: slots for index, slots in joined.items()}
        on = {name: hosts[name] for name in sorted(hosts)}
        on[f"{outcome.template.template.name}:virtual"] = (
            settled.bucket.n - sum(joined.values())
        )
        start = outcome.start
        found.append(
            Reservation(outcome.job, start, on, start + settled.bucket.limit, virtual=True)
        )
    return found
