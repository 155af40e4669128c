"""The templates' virtual hosts in the catalog pass: each template's supply this
session, the record its virtual hosts share, and whether they could ever take a
bucket's jobs."""

from __future__ import annotations

import math

from xce.model.cluster import HostTemplate
from xce.sched.buckets import Bucket
from xce.sched.failure import Failure
from xce.sched.holds import empty_room
from xce.sched.hosts import HostRecord, template_allowed
from xce.sched.kept import KeptHosts
from xce.sched.reasons import RESOURCE, clock
from xce.sched.state import SchedulerState
from xce.sched.usage import NGPUS

# The check of a job that takes more hosts than its template's `max`: the catalog pass
# cannot place it wholly there, but one that spreads may still run on free real hosts
# with the rest on the template (sched/holds_wide.py; admission: sched/ever.py).
BEYOND_MAX = "max"


class TemplateSupply:
    """One template's virtual hosts in this session."""

    __slots__ = (
        "_no_more",
        "allowance",
        "arrival",
        "arrivals",
        "empty",
        "expected",
        "free_total",
        "frontier",
        "held_back",
        "hosts",
        "in_flight",
        "in_flight_total",
        "index",
        "jobs",
        "kept",
        "lead",
        "new",
        "resources",
        "template",
    )

    def __init__(
        self,
        index: int,
        template: HostTemplate,
        in_flight: int,
        allowance: int,
        virtual: tuple[HostRecord, dict[str, float]],
        arrivals: list[float],
        lead: float,
        held_back: bool = False,
    ) -> None:
        """`held_back`: the runtime allowance (the provisioner's back-off after
        provider failures, or `POST /catalog`), not `max`, stops new hosts."""
        self.index = index  # position in rank order
        self.template = template
        self.expected: set[int] = set()  # capacity indices of the in-flight hosts
        self.free_total = 0  # free slots on this template's virtual hosts
        self.frontier = 0  # hosts[:frontier] have no free slot left
        self.in_flight = in_flight  # expected hosts not opened yet this session
        self.in_flight_total = in_flight
        self.allowance = allowance  # new hosts that may still be opened
        self.hosts: list[int] = []  # capacity indices, in the order they are tried
        self.new = 0  # new hosts opened
        self.arrivals = arrivals  # when each in-flight host is expected, earliest first
        self.lead = lead  # how long a new host takes to join
        self.arrival: dict[int, float] = {}  # opened host -> when it is expected

        self.jobs: list[int] = []
        # Hosts kept for jobs wider than the template's max that ask for them later
        # (sched/kept.py; None: no such job this session)
        self.kept: KeptHosts | None = None
        self.empty, self.resources = virtual
        self.held_back = held_back
        self._no_more: Failure | None = None

    @property
    def next_arrival(self) -> float:
        """When the first in-flight host not opened yet is expected (inf: none left);
        they are opened earliest first (sched/first_fit.py)."""
        if self.in_flight <= 0:
            return math.inf
        return self.arrivals[self.in_flight_total - self.in_flight]

    @property
    def room(self) -> int:
        """Hosts still to come: in flight and not opened yet, then new ones."""
        return self.in_flight + max(0, self.allowance)

    def keep(self, job: int, count: int, start: float) -> bool:
        """Keep `count` hosts from `start` for `job`, wider than the template's max,
        which asks for them later (sched/kept.py); False: jobs ahead of it took them."""
        kept = self.kept
        assert kept is not None  # (made as the pass starts: every opened host counts)
        if not kept.admits(count, start, self.room):
            return False
        kept.keep(job, count, start)
        return True

    def kept_from(self, chosen: dict[int, int], opening: int, busy_until: float) -> Failure | None:
        """Why a job busy on the template until `busy_until`, on `chosen` hosts opened
        so far and `opening` more, may not have them: it would leave a job the hosts
        are kept for too few (sched/kept.py); None: it may."""
        kept = self.kept
        assert kept is not None
        flying = min(opening, self.in_flight)  # (in-flight hosts it opens, then new)
        room = self.in_flight - flying + max(0, self.allowance - (opening - flying))
        short = kept.short(room, chosen, busy_until)
        if short is None:
            return None
        return Failure(
            RESOURCE, "allowance",
            f"Template {self.template.name}'s hosts are kept for job {short[0]} "
            f"from {clock(short[1])} (it is wider than the template's max): "
            "this job would keep one busy past then",
        )

    def lend(self, chosen: dict[int, int], opened: int, busy_until: float) -> None:
        """A job busy until `busy_until` was placed on `chosen` hosts and on the last
        `opened` ones opened (sched/kept.py: no host kept, nothing to note)."""
        if self.kept is not None:
            self.kept.lend(chosen, self.hosts[len(self.hosts) - opened:], busy_until)

    @property
    def no_more(self) -> Failure:
        """Why the template cannot take more jobs (made once per session)."""
        if self._no_more is None:
            self._no_more = _no_more_hosts(self.template, self.held_back)
        return self._no_more


def static_verdict(
    state: SchedulerState, bucket: Bucket, supply: TemplateSupply
) -> tuple[Failure | None, int]:
    """Why the template's hosts could never take the bucket's jobs (None: they
    could), and how many of the jobs' slots an empty host of it holds."""
    return template_verdict(state, bucket, supply.template, supply.empty)


def template_verdict(
    state: SchedulerState, bucket: Bucket, template: HostTemplate, empty: HostRecord
) -> tuple[Failure | None, int]:
    """static_verdict for `template`, whose virtual hosts share the record `empty`
    (also what admission reads: sched/ever.py)."""
    verdict: Failure | None = None
    select = bucket.req.select
    room = empty_room(template, bucket.use)
    if not template_allowed(bucket.queue.hosts, template.name):
        verdict = Failure(
            RESOURCE, "queue", f"queue {bucket.queue.name} may not use template {template.name}"
        )
    elif bucket.hosts and not template_allowed(bucket.hosts, template.name):
        verdict = Failure(
            RESOURCE, "hosts", f"the job's host list (-m) does not name template {template.name}"
        )
    elif select is not None and not select(empty.attrs):
        verdict = Failure(
            RESOURCE, "select", f"select[{select.text}] does not match template {template.name}"
        )
    elif bucket.gpus > template.gpus:
        verdict = Failure(
            RESOURCE, "gpus",
            f"template {template.name} has {template.gpus} GPUs per host, the job needs "
            f"{bucket.gpus} on each of its hosts",
        )
    else:
        need = bucket.unit
        per_host = bucket.n if need == bucket.n else (
            room if bucket.req.span_ptile is None else need
        )
        if room < need:
            verdict = Failure(
                RESOURCE, "shape",
                f"template {template.name} holds {room} such slots per host, "
                f"the job needs {need} on one host",
            )
        elif math.ceil(bucket.n / per_host) > template.max:
            verdict = Failure(
                RESOURCE, BEYOND_MAX,
                f"template {template.name} would need {math.ceil(bucket.n / per_host)} "
                f"hosts for the job, max {template.max}",
            )
        else:
            for res, _amount in bucket.shared:
                if not any(
                    p.hosts is None or template_allowed(p.hosts, template.name)
                    for p in state.pools[res]
                ):
                    verdict = Failure(
                        RESOURCE, "shared",
                        f"no pool of {res} reaches template {template.name}",
                    )
                    break
    return verdict, room


def _no_more_hosts(template: HostTemplate, held_back: bool = False) -> Failure:
    if held_back:
        return Failure(
            RESOURCE, "allowance",
            f"Template {template.name} allows no more hosts now (its runtime allowance: "
            "the provisioner's back-off after provider failures, or POST /catalog)",
        )
    return Failure(
        RESOURCE, "allowance", f"Template {template.name} allows no more hosts (max {template.max})"
    )


def virtual_host(template: HostTemplate) -> tuple[HostRecord, dict[str, float]]:
    """The record every virtual host of a template shares, and its consumables (its
    GPUs among them, as free capacity counts them)."""
    record = HostRecord(
        -1, f"{template.name}:virtual", template.slots, template.type, template.model,
        template.resources, template.name, "ok", 0, template.gpus,
    )
    resources = {
        r: (0.0 if isinstance(v, bool) else float(v)) for r, v in template.resources.items()
    }
    if template.gpus:
        resources[NGPUS] = float(template.gpus)
    return record, resources


def virtual_of(
    state: SchedulerState, template: HostTemplate
) -> tuple[HostRecord, dict[str, float]]:
    """virtual_host of `template`, made once per configuration (kept in state.virtual)."""
    found = state.virtual.get(template.name)
    if found is None:
        found = state.virtual[template.name] = virtual_host(template)
    return found
