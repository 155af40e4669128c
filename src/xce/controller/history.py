"""The controller's event history of supply (like LSF's `badmin hist`): the durable
facts about hosts, leases, provisioning requests and instances, borrowed tokens and the
runtime catalog, each told as one line with its reason (`GET /history`,
`xce history`)."""

from __future__ import annotations

from collections.abc import Iterable

from xce.controller.store import Fact
from xce.model.api import HistoryEntry
from xce.model.events import (
    Event,
    ExpectedHostEnded,
    HostAdded,
    HostExpected,
    HostRemoved,
    HostStateChanged,
    InstanceChanged,
    InstanceRecorded,
    LeaseGranted,
    LeaseReleased,
    RequestChanged,
    RequestRecorded,
    SupplyChanged,
    TokensChanged,
)

SCAN = 20_000  # facts looked at, at most, for one answer


def told(event: Event) -> str | None:
    """One line for a fact about supply; None for the others (jobs, sessions)."""
    match event:
        case RequestRecorded(request=rid, template=template, count=count, provider=provider,
                             holder=holder, jobs=jobs):
            return (f"request {rid}: {count} x {template} from {provider}, by {holder}"
                    + _for_jobs(jobs))
        case RequestChanged(request=rid, state=state, reason=reason):
            return f"request {rid} {state}: {reason}"
        case InstanceRecorded(host=host, request=rid):
            return f"instance {host} requested (request {rid})"
        case InstanceChanged(host=host, state=state, reason=reason, instance_id=iid):
            return f"instance {host} {state}: {reason}" + (f" (id {iid})" if iid else "")
        case HostExpected(name=name, template=template, provider=provider, request=rid):
            return f"host {name} expected: template {template}, provider {provider}, " \
                   f"request {rid}"
        case ExpectedHostEnded(name=name, state=state, reason=reason):
            return f"expected host {name} {state}: {reason}"
        case HostAdded(name=name, template=template, slots=slots):
            return f"host {name} joined: template {template}" if template is not None \
                else f"host {name} added ({slots} slots)"
        case HostStateChanged(name=name, state=state, reason=reason):
            return f"host {name} {state}" + (f": {reason}" if reason else "")
        case HostRemoved(name=name):
            return f"host {name} removed"
        case TokensChanged(pool=pool, step=step, amount=amount):
            return f"pool {pool}: {step.replace('_', ' ')} {amount:g} token(s)"
        case LeaseGranted(provider=provider, holder=holder, token=token):
            return f"lease {provider}: held by {holder}, fencing token {token}"
        case LeaseReleased(provider=provider, holder=holder, token=token):
            return f"lease {provider}: released by {holder} (token {token})"
        case SupplyChanged(allowance=allowance, headroom=headroom, lead_time=lead) if (
            allowance or headroom or lead
        ):
            parts = [f"allowance {t} {'lifted' if a < 0 else a}" for t, a in allowance.items()]
            parts += [f"headroom {p} {'lifted' if h < 0 else f'{h:g}'}"
                      for p, h in headroom.items()]
            parts += [f"lead time {t} {'configured' if s < 0 else f'{s:.1f} s'}"
                      for t, s in lead.items()]
            return "runtime catalog: " + ", ".join(parts)
    return None


def _for_jobs(jobs: tuple[int, ...], shown: int = 5) -> str:
    """`, for jobs 3, 4, 9` (the first few, then how many more); nothing for none."""
    if not jobs:
        return ""
    more = f" and {len(jobs) - shown} more" if len(jobs) > shown else ""
    return f", for job(s) {', '.join(map(str, jobs[:shown]))}{more}"


def entries(facts: Iterable[Fact], limit: int, renewals: bool = False) -> list[HistoryEntry]:
    """The last `limit` supply facts among `facts`, oldest first; a lease renewed by
    its holder (a LeaseGranted of the same holder and fencing token as the provider's
    last one, every provisioner round) only with `renewals`."""
    found: list[HistoryEntry] = []
    leases: dict[str, tuple[str, int]] = {}  # provider -> (holder, token) held
    for fact in facts:
        event = fact.event
        if isinstance(event, LeaseGranted):
            held = (event.holder, event.token)
            renewed = leases.get(event.provider) == held
            leases[event.provider] = held
            if renewed and not renewals:
                continue
        elif isinstance(event, LeaseReleased):
            leases.pop(event.provider, None)
        text = told(event)
        if text is not None:
            found.append(HistoryEntry(fact.seq, fact.time, type(event).__name__, text))
    return found[-limit:] if limit else found
