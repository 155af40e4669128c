"""The simulator's elastic supply: hosts requested of the simulated providers (in
flight, joining or failing, cancelled, reclaimed, drained, given back) and tokens
borrowed from the simulated license pools, each change told to the scheduler as the
live controller tells it; the policy's actions carried out on them; and what they
count (slots present over time, host-hours and their busy part, token-hours).

Which container a provisioned host is in says its state (xce.model.lifecycle.HostState):
`provisioned` holds every host up (ok or closed, in join order), `closed` the closed
(drained) ones, `open_provisioned` the ok ones (in join order, for max_lifetime); they
are indexes, kept for speed. A host changes as the host table allows (`HOST_LIFE`): ok
-> closed for the drain's cause; ok or closed -> removed when it is given back or
reclaimed (the controller's decommissioned and lost steps between are not simulated:
nothing waits on them).
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import partial
from itertools import groupby
from typing import TYPE_CHECKING, Final

from xce.model.causes import Cause
from xce.model.cluster import ClusterConfig, HostTemplate
from xce.model.cost import template_prices
from xce.model.events import HostAdded, HostRemoved, HostStateChanged, SupplyChanged
from xce.model.lifecycle import HostState, host_change
from xce.model.policy import LeadTime, ProviderModel, TokenModel
from xce.policy import (
    Action,
    DecommissionHost,
    DrainHost,
    RequestHosts,
    RequestTokens,
    ReturnTokens,
    SetAllowance,
)
from xce.policy.actions import CancelHosts
from xce.sched.requested import jobs_served
from xce.sched.suspended import suspended_hosts
from xce.sim.loop import TIMER
from xce.sim.providers import HostProvider, TokenPool

if TYPE_CHECKING:
    from xce.sim.driver import Simulator

# (read once: compiled, each `HostState.X` is a slow generic lookup through the
# enum's metaclass; a drain per idle host given back in elastic simulations)
_CLOSED: Final = HostState.CLOSED
_OK: Final = HostState.OK


class Order:
    """Hosts of one template requested together that join at the same moment (one
    action), or fail then (one action each: `joins` False); the hosts of it cancelled
    before then are taken off `count`."""

    __slots__ = ("count", "jobs", "joins", "requested")

    def __init__(
        self, requested: float, count: int, joins: bool, jobs: tuple[int, ...] = ()
    ) -> None:
        self.requested = requested
        self.count = count
        self.joins = joins
        self.jobs = jobs  # the jobs its hosts were requested for (HostAdded.requested_for)


def mean_lead_time(lead: LeadTime) -> float:
    """The mean of a lead-time model (`xce.sim.providers.draw_lead_time` draws from it;
    a normal one is taken at its mean, its few draws below 0 notwithstanding)."""
    if lead.dist == "uniform":
        return (lead.low + lead.high) / 2
    return lead.mean


class LevelOverTime:
    """A level that changes by steps (the slots present, the cost per second of the
    hosts up), integrated over time from `start`: a change before then counts from
    then."""

    __slots__ = ("_clock", "_level", "_total")

    def __init__(self, start: float) -> None:
        self._level = 0.0
        self._clock = start
        self._total = 0.0  # up to `_clock`

    def change(self, delta: float, now: float) -> None:
        """The level changes by `delta` at `now`."""
        if now > self._clock:
            self._total += self._level * (now - self._clock)
            self._clock = now
        self._level += delta

    def to(self, end: float) -> float:
        """The integral from the start up to `end` (not before the last change)."""
        return self._total + self._level * max(0.0, end - self._clock)


class Supply:
    """The hosts and tokens of one simulation run beyond its static hosts, and the
    slots present over time (static hosts included)."""

    def __init__(
        self, sim: Simulator, config: ClusterConfig,
        host_providers: Mapping[str, HostProvider] | None,
    ) -> None:
        """The simulated host providers (per provider, and per template) and license
        pools, and what is in flight, borrowed and provisioned (nothing yet)."""
        self.sim = sim
        self.loop, self.state, self.metrics, self.rng = sim.loop, sim.state, sim.metrics, sim.rng
        self.templates: dict[str, HostTemplate] = {t.name: t for t in config.catalog.templates}
        self.providers = {
            t.provider: HostProvider(
                t.provider, config.simulation.providers.get(t.provider, ProviderModel())
            )
            for t in config.catalog.templates
        }
        # template -> its simulated provider: its provider's, unless `host_providers`
        # gives it one of its own (xce.sim.provider_kinds: real providers' models)
        self.template_providers: dict[str, HostProvider] = {
            t.name: self.providers[t.provider] for t in config.catalog.templates
        }
        self.template_providers.update(host_providers or {})
        self.pools: dict[str, TokenPool] = {}
        for countable in config.catalog.countables:
            key = self.token_key(countable.resource, countable.pool)
            model = config.simulation.countables.get(key) or config.simulation.countables.get(
                countable.resource, TokenModel()
            )
            size = countable.max_borrow if model.pool is None else model.pool
            self.pools[key] = TokenPool(key, model, size)
        self.in_flight: dict[str, int] = {t: 0 for t in self.templates}
        # template -> its hosts in flight, in request order (the scheduler is told when
        # each was requested; cancelled: the latest first)
        self._orders: dict[str, list[Order]] = {t: [] for t in self.templates}
        self.void_actions = 0  # scheduled joins and failures of hosts since cancelled (no work)
        # (current state, cause) -> what closing a host so records (Supply._drain)
        self._closes: dict[tuple[str, Cause], tuple[str, Cause | None]] = {}
        self._template_slots: dict[str, float] = {
            t.name: float(t.slots) for t in config.catalog.templates
        }
        self.tokens_in_flight: dict[str, float] = {k: 0.0 for k in self.pools}
        self.borrowed: dict[str, float] = {k: 0.0 for k in self.pools}
        self.provisioned: dict[str, tuple[str, float]] = {}  # host -> (template, joined)
        self.used_hosts: set[str] = set()  # hosts present that ran a job
        # running job on provisioned hosts -> (start, template -> its slots there over
        # the template's slots): host-hours busy, counted when its run ends
        self.busy: dict[int, tuple[float, dict[str, float]]] = {}
        self.closed: set[str] = set()  # provisioned hosts drained, not yet released
        self.closed_count: dict[str, int] = {}  # template -> of them, its hosts
        # provisioned hosts not drained -> when they joined, in join order
        self.open_provisioned: dict[str, float] = {}
        # what the next policy round is told: templates whose hosts failed, or joined
        self.failures: list[str] = []
        self.joined: list[str] = []
        self._host_seq = 0
        self._token_clock = 0.0
        # Available slot-seconds, integrated as capacity changes (from the first submit)
        self.capacity = LevelOverTime(sim.first_submit)
        self.static_slots = sum(h.slots for h in config.hosts)
        self.capacity.change(float(self.static_slots), self.loop.now)
        # What the provisioned hosts up cost per second (their templates' prices per
        # host-hour / 3600): the report's cost over time (the summary's `cost` comes
        # from the host-hours)
        self._price_of = {
            name: price / 3600
            for name, price in template_prices(config.catalog.templates).items()
        }
        self.cost = LevelOverTime(sim.first_submit)

    # ------------------------------------------------------------------ plumbing
    @staticmethod
    def token_key(resource: str, pool: str | None) -> str:
        return resource if pool in (None, "default") else f"{resource}/{pool}"

    def tell_lead_times(self, config: ClusterConfig) -> None:
        """Tell the scheduler how long a new host of each template takes to join, the
        mean of its simulated provider's lead-time model, for templates whose
        `expected_lead_time` is not set (the scheduler uses the configured one)."""
        leads = {
            t.name: mean_lead_time(self.template_providers[t.name].model.lead_time)
            for t in config.catalog.templates if t.expected_lead_time is None
        }
        if leads:
            self.sim.apply(SupplyChanged(lead_time=leads, time=self.loop.now))

    def drained_empty(self) -> bool:
        """Whether a drained host runs nothing: a policy round would give it back."""
        return bool(self.closed and self.closed_empty())

    def closed_empty(self) -> list[str]:
        """The drained hosts that run nothing, a job suspended by a preemption
        included (sched/suspended.py), in no order. (From the smaller of the drained
        hosts and the provisioned hosts running nothing: hosts drained at their
        maximum lifetime may run long jobs for days, RICC-2010-2.)"""
        closed, state = self.closed, self.state
        idle = state.idle_provisioned
        if len(idle) < len(closed):
            empty = [host for host in idle.values() if host.name in closed]
        else:
            by_name = state.host_by_name
            empty = [by_name[name] for name in closed if not by_name[name].running]
        if state.preemptions.suspended:
            on = suspended_hosts(state)
            return [host.name for host in empty if host.index not in on]
        return [host.name for host in empty]

    # ------------------------------------------------------------------ accounting
    def busy_start(self, job: int, hosts: dict[str, int], start: float) -> None:
        """A job starts on `hosts`: its share of each template's provisioned hosts."""
        provisioned, slots_of = self.provisioned, self._template_slots
        shares: dict[str, float] = {}
        for host, slots in hosts.items():
            entry = provisioned.get(host)
            if entry is not None:
                template = entry[0]
                shares[template] = shares.get(template, 0.0) + slots / slots_of[template]
        if shares:
            self.busy[job] = (start, shares)

    def busy_end(self, job: int) -> None:
        """A job's run on provisioned hosts ends (finished, killed, requeued or lost)."""
        start, shares = self.busy[job]
        del self.busy[job]
        seconds, run = self.metrics.busy_host_seconds, self.loop.now - start
        for template, share in shares.items():
            seconds[template] = seconds.get(template, 0.0) + share * run

    def account_tokens(self) -> None:
        """Integrate borrowed tokens over time (token-hours)."""
        now = self.loop.now
        self.metrics.token_seconds += sum(self.borrowed.values()) * (now - self._token_clock)
        self._token_clock = now

    def seconds_to(self, end: float) -> tuple[float, dict[str, float], dict[str, float]]:
        """Slot-seconds present, and per template the seconds of provisioned hosts and
        of their busy part, up to `end`: hosts still up and jobs still running on them
        count until then, without changing what later calls see."""
        capacity = self.capacity.to(end)
        seconds = dict(self.metrics.host_seconds)
        for template, joined in self.provisioned.values():
            seconds[template] = seconds.get(template, 0.0) + end - joined
        busy = dict(self.metrics.busy_host_seconds)
        for start, shares in self.busy.values():
            for template, share in shares.items():
                busy[template] = busy.get(template, 0.0) + share * (end - start)
        return capacity, seconds, busy

    # ------------------------------------------------------------------ actions
    def act(self, action: Action) -> None:
        """Carry out one of the policy's actions."""
        # (by exact type, most frequent first: compiled, a class pattern is a slow
        # generic isinstance per case)
        sim = self.sim
        if type(action) is DrainHost:
            self._drain(action.host, action.cause)
        elif type(action) is DecommissionHost:
            self.release(action.host, lost=False)
            if self.state.pending:  # (the session sets its timers once its round is over)
                sim.dirty()
        elif type(action) is RequestHosts:
            self._request_hosts(action.template, action.count, action.jobs)
        elif type(action) is RequestTokens:
            self._request_tokens(action.resource, action.amount)
        elif type(action) is CancelHosts:
            self._cancel_hosts(action.template, action.count)
        elif type(action) is ReturnTokens:
            key = action.resource
            amount = min(action.amount, self.borrowed.get(key, 0.0))
            if amount > 0:
                self.account_tokens()
                self.borrowed[key] -= amount
                self.pools[key].returned(amount)
                sim.apply(SupplyChanged(borrowed={key: self.borrowed[key]}, time=self.loop.now))
                if self.state.pending:  # (as a host given back: else nothing to decide)
                    sim.dirty()
        elif type(action) is SetAllowance:
            value = -1 if action.allowance is None else action.allowance
            sim.apply(SupplyChanged(allowance={action.template: value}, time=self.loop.now))
            sim.dirty()

    # ------------------------------------------------------------------ hosts
    def _drain(self, host: str, cause: Cause) -> None:
        """Close a provisioned host for its cause, as the provisioner asks the
        controller (closed_Idle or closed_Life; the same fact)."""
        current = _CLOSED if host in self.closed else _OK
        # What the host table records depends on the two states and the cause alone:
        # asked once each (host_change is interpreted; a drain per idle host given
        # back, 60,716 in the first 20,000 jobs of elastic HPC2N)
        change = self._closes.get((current, cause))
        if change is None:
            change = self._closes[(current, cause)] = host_change(
                host, current, _CLOSED, cause, cause
            )
        reason, recorded = change
        self.sim.apply(HostStateChanged(name=host, state=_CLOSED, time=self.loop.now,
                                        reason=reason, cause=recorded))
        if host not in self.closed:
            self.closed.add(host)
            template = self.provisioned[host][0]
            self.closed_count[template] = self.closed_count.get(template, 0) + 1
        if host in self.open_provisioned:
            del self.open_provisioned[host]
        # Only waiting work can be planned anew without the host: an empty one is
        # decommissioned in this round (policy/decide.py), a busy one is seen to when
        # its last job ends (Simulator.freed)
        if self.state.pending:
            self.sim.dirty()

    def _request_hosts(self, name: str, count: int, jobs: tuple[int, ...]) -> None:
        """Ask the template's provider for `count` hosts for `jobs` (the demand's, in
        scheduling order: sched/requested.py's jobs_served says which its hosts are for)."""
        jobs = jobs_served(jobs, count)
        provider = self.template_providers[name]
        metrics = self.metrics
        metrics.requests += 1
        metrics.hosts_requested[name] = metrics.hosts_requested.get(name, 0) + count
        fates = [provider.answer(self.rng) for _ in range(count)]
        now, orders = self.loop.now, self._orders[name]
        # Hosts drawn one after the other with the same fate and lead time are one run:
        # those that join, join in one action (actions of one time run in the order
        # scheduled, so this is the order of one action each).
        for (fate, delay), run in groupby(fates):
            hosts = len(list(run))
            if fate == "capacity":
                metrics.hosts_failed[name] = metrics.hosts_failed.get(name, 0) + hosts
                self.failures.extend([name] * hosts)
                self.sim.dirty()
                continue
            self.in_flight[name] += hosts
            order = Order(now, hosts, fate == "join", jobs)
            orders.append(order)
            if fate == "join":
                self.loop.at(now + delay, partial(self._hosts_join, name, order))
            else:
                for _ in range(hosts):
                    self.loop.at(now + delay, partial(self._host_fails, name, order))
        self._in_flight_changed(name)
        self.sim.dirty()

    def _in_flight_changed(self, name: str) -> None:
        """Tell the scheduler a template's hosts in flight and when they were requested."""
        requested: list[float] = []
        for order in self._orders[name]:
            requested.extend([order.requested] * order.count)
        self.sim.apply(SupplyChanged(
            in_flight={name: self.in_flight[name]}, requested={name: requested},
            time=self.loop.now,
        ))

    def _arrived(self, name: str, order: Order, count: int) -> None:
        """`count` hosts of an order are no longer in flight (they joined or failed)."""
        order.count -= count
        if not order.count:
            self._orders[name].remove(order)
        self.in_flight[name] -= count
        self._in_flight_changed(name)

    def _cancel_hosts(self, name: str, count: int) -> None:
        """Cancel up to `count` hosts of a template in flight, the latest requested
        first: they will not join (their provider's capacity is free again)."""
        orders = self._orders.get(name, [])  # (each with hosts in flight)
        cancelled = 0
        for order in reversed(orders):
            take = min(count - cancelled, order.count)
            order.count -= take
            cancelled += take
            if not order.joins:
                self.void_actions += take  # (the last `take` of its failures)
            elif not order.count:
                self.void_actions += 1
            if cancelled == count:
                break
        if not cancelled:
            return
        self._orders[name] = [order for order in orders if order.count]
        provider = self.template_providers[name]
        for _ in range(cancelled):
            provider.released()
        metrics = self.metrics
        metrics.hosts_cancelled[name] = metrics.hosts_cancelled.get(name, 0) + cancelled
        self.in_flight[name] -= cancelled
        self._in_flight_changed(name)
        self.sim.dirty()

    def _hosts_join(self, name: str, order: Order) -> None:
        """The hosts of an order still in flight join, one after the other."""
        count = order.count
        if not count:  # all cancelled
            self.void_actions -= 1
            return
        template = self.templates[name]
        now = self.loop.now
        self._arrived(name, order, count)
        slots, type_, model = template.slots, template.type, template.model
        resources = template.resources  # (the scheduler copies what it keeps)
        provider = self.template_providers[name]
        provisioned, open_provisioned = self.provisioned, self.open_provisioned
        sim = self.sim
        for _ in range(count):
            self._host_seq += 1
            host = f"{name}-{self._host_seq}"
            sim.apply(
                HostAdded(
                    name=host, slots=slots, type=type_, model=model, resources=resources,
                    template=name, time=now, requested_for=order.jobs,
                )
            )
            provisioned[host] = (name, now)
            open_provisioned[host] = now
            after = provider.reclaim_after(self.rng)
            if after is not None:
                # A timer, not work: a reclaim due after the host was given back must
                # not keep the run going (nor stretch its sim_seconds).
                self.loop.at(now + after, partial(self._reclaimed, host), TIMER)
        self.capacity.change(float(slots * count), now)
        price = self._price_of.get(name, 0.0)
        if price:
            self.cost.change(price * count, now)
        self.metrics.hosts_joined[name] = self.metrics.hosts_joined.get(name, 0) + count
        self.joined.append(name)
        sim.dirty()

    def _host_fails(self, name: str, order: Order) -> None:
        """A host of an order never joins (unless the order's hosts were cancelled)."""
        if not order.count:  # cancelled
            self.void_actions -= 1
            return
        self.template_providers[name].released()
        self.metrics.hosts_failed[name] = self.metrics.hosts_failed.get(name, 0) + 1
        self.failures.append(name)
        self._arrived(name, order, 1)
        self.sim.dirty()

    def _reclaimed(self, host: str) -> None:
        """The provider takes a host back (spot-style): its jobs are requeued (or
        exited, as their queue says)."""
        if host not in self.provisioned:
            return
        self.sim.jobs.lost(host)
        self.release(host, lost=True)
        self.sim.freed()

    def release(self, host: str, lost: bool) -> None:
        """Give a provisioned host back (the caller sees to what its capacity freed)."""
        template, joined = self.provisioned[host]
        del self.provisioned[host]
        if host in self.closed:
            self.closed.discard(host)
            self.closed_count[template] -= 1
        if host in self.open_provisioned:  # (not pop: compiled, a call by name)
            del self.open_provisioned[host]
        now = self.loop.now
        self.sim.apply(HostRemoved(name=host, time=now))
        self.capacity.change(-self._template_slots[template], now)
        price = self._price_of.get(template, 0.0)
        if price:
            self.cost.change(-price, now)
        seconds = self.metrics.host_seconds
        seconds[template] = seconds.get(template, 0.0) + now - joined
        counter = self.metrics.hosts_lost if lost else self.metrics.hosts_reclaimed
        counter[template] = counter.get(template, 0) + 1
        if host in self.used_hosts:
            self.used_hosts.discard(host)  # (its name is never given again)
        else:
            self.metrics.hosts_never_used += 1
        self.template_providers[template].released()

    # ------------------------------------------------------------------ tokens
    def _request_tokens(self, key: str, amount: float) -> None:
        pool = self.pools.get(key)
        if pool is None:
            return
        self.metrics.requests += 1
        self.metrics.tokens_requested += amount
        granted, delay = pool.answer(amount, self.rng)
        self.tokens_in_flight[key] += amount
        in_flight = {key: self.tokens_in_flight[key]}
        now = self.loop.now
        self.sim.apply(SupplyChanged(tokens_in_flight=in_flight, time=now))
        self.loop.at(now + delay, partial(self._tokens_answer, key, amount, granted))
        self.sim.dirty()

    def _tokens_answer(self, key: str, asked: float, granted: float) -> None:
        self.account_tokens()
        self.tokens_in_flight[key] -= asked
        self.borrowed[key] += granted
        self.metrics.tokens_borrowed += granted
        self.metrics.tokens_refused += asked - granted
        self.sim.apply(
            SupplyChanged(
                tokens_in_flight={key: self.tokens_in_flight[key]},
                borrowed={key: self.borrowed[key]}, time=self.loop.now,
            )
        )
        self.sim.dirty()
