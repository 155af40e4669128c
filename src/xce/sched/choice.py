"""Where new hosts come from: the catalog's `choose` rule (docs/scheduling.md,
"Choosing the template").

The catalog pass places a job on hosts that cost nothing more first (hosts already
opened this session, then hosts in flight) and only then opens new hosts. This module
says in which order it tries the templates that could hold a bucket's jobs:

* `rank`: by rank, ties by name (the configured order of preference);
* `cost`: by the job's *price share*: for each host the job would take of an empty
  template, the largest fraction of that host's slots, per-slot consumables or GPUs
  it uses, summed over those hosts and times the template's price per host-hour;
* `least-waste`: by the *unused fraction* the job leaves on the hosts it would open:
  per dimension (slots, each host consumable of the template, GPUs when the template
  has some) the part of those hosts' capacity the job does not use, averaged over the
  dimensions (Cluster Autoscaler's least-waste expander, which adds the unused CPU
  and memory fractions of the nodes it would add).

Ties (scores equal to 9 decimal places) keep rank order: rank, then name. Every
score depends only on the job's requirements and the templates' configuration, so an
order is worked out once per bucket, not per job. Pure: no I/O, clock or randomness.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Sequence
from typing import Final, NamedTuple

from xce.model.cluster import Choose, ClusterConfig, HostTemplate, ResourceValue
from xce.sched.buckets import Bucket

DECIMALS: Final = 9  # scores are compared rounded to this many decimal places


class JobTake(NamedTuple):
    """What one job takes of hosts: its slots, its per-slot consumables, the pieces its
    span makes (each on its own host; () for a job that spreads slot by slot) and the
    GPUs it uses on every host it runs on."""

    n: int
    per_slot: tuple[tuple[str, float], ...] = ()
    pieces: tuple[int, ...] = ()
    gpus: int = 0


def _amount(value: ResourceValue | None) -> float:
    return 0.0 if value is None or isinstance(value, bool) else float(value)


def host_pieces(job: JobTake, room: int) -> tuple[int, ...]:
    """The slots the job puts on each empty host of a template that holds `room` of
    its slots: the pieces of its span; without a span, `room` slots per host and the
    rest on the last one (as the catalog pass opens hosts)."""
    if job.pieces:
        return job.pieces
    full, rest = divmod(job.n, room)
    return (room,) * full + ((rest,) if rest else ())


def piece_fraction(template: HostTemplate, job: JobTake, piece: int) -> float:
    """The largest fraction of an empty host of `template` that `piece` slots of the
    job take: of its slots, of each consumable the job reserves per slot, of its GPUs
    (the job's GPUs per host). Infinite when the host lacks what the job needs."""
    fraction = piece / template.slots
    resources = template.resources
    for res, amount in job.per_slot:
        have = _amount(resources.get(res))
        fraction = max(fraction, piece * amount / have if have > 0 else math.inf)
    if job.gpus:
        gpus = template.gpus
        fraction = max(fraction, job.gpus / gpus if gpus > 0 else math.inf)
    return fraction


def price_share(template: HostTemplate, job: JobTake, room: int) -> float:
    """The job's share of the price of the hosts it would take of `template` (whose
    empty host holds `room` of its slots): the sum over those hosts of the largest
    fraction it takes of each (piece_fraction), times the price per host-hour."""
    if template.price == 0:
        return 0.0
    share = 0.0
    for piece in host_pieces(job, room):
        share += piece_fraction(template, job, piece)
    return share * template.price


def unused_fraction(
    template: HostTemplate, job: JobTake, room: int, consumables: Collection[str]
) -> float:
    """The unused fraction the job leaves on the hosts it would open of `template`:
    per dimension, the capacity of those hosts it does not use over their capacity;
    the dimensions are slots, each of `consumables` (the cluster's host consumables)
    the template has, and GPUs when the template has some; averaged over them."""
    hosts = len(host_pieces(job, room))
    per_slot = dict(job.per_slot)
    unused = [1.0 - job.n / (template.slots * hosts)]
    for res in sorted(consumables):
        have = _amount(template.resources.get(res))
        if have > 0:
            unused.append(1.0 - job.n * per_slot.get(res, 0.0) / (have * hosts))
    if template.gpus > 0:
        unused.append(1.0 - job.gpus / template.gpus)
    return sum(unused) / len(unused)


def choice_order(
    rule: Choose,
    templates: Sequence[tuple[HostTemplate, int]],
    job: JobTake,
    consumables: Collection[str] = (),
) -> list[int]:
    """The order in which to try `templates` for new hosts for the job: positions into
    `templates`, which come in rank order (rank, then name), each with how many of the
    job's slots an empty host of it holds (> 0)."""
    if rule == "rank" or len(templates) < 2:
        return list(range(len(templates)))
    if rule == "cost":
        scores = [price_share(template, job, room) for template, room in templates]
    else:
        scores = [
            unused_fraction(template, job, room, consumables) for template, room in templates
        ]
    return sorted(range(len(templates)), key=lambda at: (round(scores[at], DECIMALS), at))


def host_consumables(config: ClusterConfig) -> list[str]:
    """The cluster's host consumables (numeric, consumable, not shared)."""
    return [
        name for name, r in config.resources.items()
        if r.consumable and not r.shared and r.type == "numeric"
    ]


def bucket_order(
    config: ClusterConfig,
    bucket: Bucket,
    ranked: Sequence[HostTemplate],
    rooms: Sequence[int],
    usable: list[int],
) -> list[int]:
    """`usable` (positions into `ranked`, the templates by rank, whose empty hosts hold
    `rooms` of the bucket's job slots) in the order the catalog's `choose` rule tries
    them for the bucket's jobs."""
    rule = config.catalog.choose
    if rule == "rank" or len(usable) < 2:
        return usable
    job = JobTake(bucket.n, bucket.per_slot, bucket.pieces, bucket.gpus)
    order = choice_order(
        rule, [(ranked[at], rooms[at]) for at in usable], job, host_consumables(config)
    )
    return [usable[i] for i in order]
