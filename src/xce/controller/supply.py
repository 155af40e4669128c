"""Shared pools and the runtime catalog, as the controller serves them.

Borrowing and returning tokens go step by step (see `tokens.py`): each step is one
`TokensChanged` fact logged together with the `SupplyChanged` that gives the
scheduler the pool's new absolute values (tokens in flight, borrowed, headroom). A
return takes the tokens out of the pool's total at once; the controller itself logs
`returned` once the tokens in use fit within what is left (`settle_returns`).

The runtime catalog is what the provisioning side may change while the controller
runs: each template's allowance and observed lead time, and each countable pool's
headroom.

A refused request raises ApiProblem and logs nothing.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

from xce.controller.auth import Identity
from xce.controller.core import Controller
from xce.controller.problems import ApiProblem, refuse
from xce.model.amounts import EPSILON
from xce.model.api import (
    CatalogInfo,
    CatalogRequest,
    CountableInfo,
    PoolInfo,
    ResourceList,
    TemplateInfo,
)
from xce.model.events import Event, SupplyChanged, TokensChanged
from xce.model.lifecycle import TOKEN_STEPS, TokenStep
from xce.sched.pools import PoolRecord
from xce.sched.queries import SchedulerQueries

log = logging.getLogger("xce.controller.supply")

LIFT = -1  # SupplyChanged: a negative allowance or headroom lifts the runtime value


# ---------------------------------------------------------------- pools
def find_pool(state: SchedulerQueries, key: str) -> PoolRecord | None:
    """The pool named `key`: its label ("vcs", "hspice/cloud"), or resource/pool
    ("vcs/default" for a resource's only pool)."""
    for pools in state.pools.values():
        for pool in pools:
            if key in (pool.label, f"{pool.resource}/{pool.name}"):
                return pool
    return None


def _pool(state: SchedulerQueries, key: str, missing: int) -> PoolRecord:
    pool = find_pool(state, key)
    if pool is None:
        known = [p.label for pools in state.pools.values() for p in pools]
        listed = f"pools: {', '.join(known)}" if known else "no shared resource is configured"
        raise ApiProblem(missing, f"unknown pool {key!r} ({listed})")
    return pool


def _countable(state: SchedulerQueries, key: str, missing: int) -> PoolRecord:
    pool = _pool(state, key, missing)
    if pool.countable is None:
        raise ApiProblem(400, f"pool {pool.label} is not countable: no catalog countable "
                              "names it, so no token of it can be borrowed")
    return pool


def fence(ctl: Controller, who: Identity, templates: Iterable[str] = (),
          pools: Iterable[str] = ()) -> None:
    """A provisioner changes a template's allowance, or a countable pool, only for a
    provider it holds the lease on (with its current token): the template's provider,
    the countable's `provider:`; a countable that names none, under any lease it holds.
    Unknown names are left to the caller's own checks."""
    if who.role != "provisioner":
        return
    for name in templates:
        template = ctl.state.templates.get(name)
        if template is not None:
            ctl.fencing.fenced(who, template.provider)
    for key in pools:
        pool = find_pool(ctl.state, key)
        if pool is None or pool.countable is None:
            continue
        if pool.countable.provider:
            ctl.fencing.fenced(who, pool.countable.provider)
        elif not ctl.leases.held(who.name, who.fence, ctl.clock()):
            refuse(who, 409, f"pool {pool.label}: a provisioner changes a countable "
                             "only under a provider lease it holds (send its fencing token)")


def pool_info(ctl: Controller, pool: PoolRecord) -> PoolInfo:
    tokens = ctl.tokens.of(pool.label)
    total = pool.base + tokens.borrowed
    return PoolInfo(
        resource=pool.resource, pool=pool.label, base=pool.base, borrowed=tokens.borrowed,
        in_flight=tokens.in_flight, returning=tokens.returning, in_use=pool.used,
        free=max(0.0, total - pool.used), headroom=pool.available_headroom(),
        max_borrow=None if pool.countable is None else pool.countable.max_borrow,
    )


def resources(ctl: Controller) -> ResourceList:
    """Every pool of every shared resource, in configuration order."""
    return ResourceList([pool_info(ctl, p) for pools in ctl.state.pools.values() for p in pools])


def step_facts(ctl: Controller, pool: PoolRecord, step: str, amount: float,
               now: float) -> list[Event]:
    """The facts of one step: the ledger's record and the scheduler's new values."""
    key = pool.label
    after = ctl.tokens.after(key, step, amount)
    headroom: dict[str, float] = {}
    if step == TokenStep.BORROW_REQUESTED and pool.headroom is not None:
        headroom[key] = max(0.0, pool.headroom - amount)  # stays "how many more"
    return [
        TokensChanged(pool=key, step=step, amount=amount, time=now),
        SupplyChanged(tokens_in_flight={key: after.in_flight}, borrowed={key: after.borrowed},
                      headroom=headroom, time=now),
    ]


def _borrow_refusal(ctl: Controller, pool: PoolRecord, amount: float) -> str | None:
    """Why `amount` more tokens may not be asked for now: max_borrow caps tokens in
    flight plus borrowed (as the scheduler counts them), and a runtime headroom caps
    what may be asked for now."""
    assert pool.countable is not None
    tokens = ctl.tokens.of(pool.label)
    cap = pool.countable.max_borrow
    room = max(0.0, cap - tokens.borrowed - tokens.in_flight)
    if amount > room + EPSILON:
        return (f"cannot borrow {amount:g} tokens of {pool.label}: max_borrow {cap:g} leaves "
                f"{room:g} ({tokens.borrowed:g} borrowed, {tokens.in_flight:g} in flight)")
    if pool.headroom is not None and amount > pool.headroom + EPSILON:
        return (f"cannot borrow {amount:g} tokens of {pool.label}: the headroom is "
                f"{max(0.0, pool.headroom):g}")
    return None


async def tokens_step(ctl: Controller, key: str, step: str, amount: float) -> PoolInfo:
    """One step asked for through the API (borrow_requested, granted, refused,
    return_requested), once durable; the pool afterwards."""
    if step not in TOKEN_STEPS or step == TokenStep.RETURNED:
        raise ApiProblem(400, f"step {step!r} cannot be asked for")
    # A session that started before a return must not hand out the returned tokens;
    # one that starts after it sees the smaller total. Checked and logged with no
    # await in between (no session can start meanwhile).
    await ctl.quiet()
    pool = _countable(ctl.state, key, missing=404)
    why = ctl.tokens.refusal(pool.label, step, amount)
    if why is None and step == TokenStep.BORROW_REQUESTED:
        why = _borrow_refusal(ctl, pool, amount)
    if why is not None:
        raise ApiProblem(409 if amount > 0 else 400, why)
    now = ctl.clock()
    log.info("pool %s: %s %g tokens", pool.label, step, amount)
    await ctl.emit(now, step_facts(ctl, pool, step, amount, now))
    return pool_info(ctl, pool)


async def settle_returns(ctl: Controller) -> None:
    """Complete the returns whose tokens are free: the pool's tokens in use fit within
    its total (base + borrowed). Called after every watch round."""
    if ctl.busy or ctl.journal is None:
        return  # the scheduler state lags the facts: next round
    now = ctl.clock()
    facts: list[Event] = []
    for key, amount in ctl.tokens.returning():
        pool = find_pool(ctl.state, key)
        if pool is not None and pool.used <= pool.total + EPSILON:
            log.info("pool %s: %g returned tokens are free: the return is complete", key, amount)
            facts += step_facts(ctl, pool, TokenStep.RETURNED, amount, now)
    if facts:
        await ctl.emit(now, facts)


# ---------------------------------------------------------------- runtime catalog
def catalog(ctl: Controller) -> CatalogInfo:
    """Templates (configuration order) with their runtime allowance and in-flight
    hosts, and countable pools with their headroom."""
    state = ctl.state
    templates = []
    for template in state.config.catalog.templates:
        alive = state.template_alive(template.name)
        in_flight = max(0, state.in_flight.get(template.name, 0))
        allowance = state.allowance.get(template.name)
        templates.append(TemplateInfo(
            name=template.name, provider=template.provider, slots=template.slots,
            max=template.max, rank=template.rank, alive=alive, in_flight=in_flight,
            allowance=allowance, available=state.new_hosts_allowed(template),
            lead_time=state.lead_time(template.name),
            runtime_lead_time=state.lead_times.get(template.name), price=template.price,
        ))
    countables = []
    for pools in state.pools.values():
        for pool in pools:
            if pool.countable is None:
                continue
            tokens = ctl.tokens.of(pool.label)
            countables.append(CountableInfo(
                resource=pool.resource, pool=pool.label, max_borrow=pool.countable.max_borrow,
                idle_time=pool.countable.idle_time, in_flight=tokens.in_flight,
                borrowed=tokens.borrowed, returning=tokens.returning,
                headroom=pool.available_headroom(), runtime_headroom=pool.headroom,
            ))
    return CatalogInfo(templates, countables)


async def set_catalog(ctl: Controller, request: CatalogRequest) -> CatalogInfo:
    """Set (or lift, with null) runtime allowances, lead times and headrooms; one fact
    for all."""
    await ctl.quiet()
    state = ctl.state
    for name in [*request.allowance, *request.lead_time]:
        if name not in state.templates:
            known = ", ".join(state.templates) or "none is configured"
            raise ApiProblem(400, f"unknown template {name!r} (templates: {known})")
    headroom: dict[str, float] = {}
    for key, value in request.headroom.items():
        pool = _countable(state, key, missing=400)
        if value is None:
            headroom[pool.label] = LIFT
            continue
        assert pool.countable is not None
        tokens = ctl.tokens.of(pool.label)
        # More than max_borrow leaves could never be asked for: the headroom in force
        # is cut to it, so that the scheduler's demand stays within what is allowed.
        room = max(0.0, pool.countable.max_borrow - tokens.borrowed - tokens.in_flight)
        headroom[pool.label] = min(float(value), room)
    allowance = {name: LIFT if value is None else value
                 for name, value in request.allowance.items()}
    lead_time = {name: float(LIFT) if value is None else float(value)
                 for name, value in request.lead_time.items()}
    if allowance or headroom or lead_time:
        now = ctl.clock()
        log.info("runtime catalog: allowance %s, headroom %s, lead time %s",
                 allowance, headroom, lead_time)
        await ctl.emit(now, [SupplyChanged(allowance=allowance, headroom=headroom,
                                           lead_time=lead_time, time=now)])
    return catalog(ctl)
