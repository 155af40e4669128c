"""What a job takes of each host it runs on: the one rule the session's capacity, the
plan's profile and running jobs all apply.

A job's *use* is its per-slot host consumables (`rusage[mem=4000]`: amounts per
slot) and its GPUs per host (`-gpu "num=2"`, LSF's per-host count). On a host where
it has k slots it takes k times each per-slot amount and its GPUs once: a job of
`-n 16 span[ptile=8] -gpu num=2` takes 2 GPUs on each of its 2 hosts. GPUs are
counted in the built-in column `ngpus` of free capacity (fed from the hosts' and
templates' `gpus`); a host has room for a job only while its free GPUs cover the
job's GPUs per host (see `Capacity.usable` and `holds.empty_room`).
"""

from __future__ import annotations

from typing import Final

from xce.resreq import NGPUS as NGPUS  # (re-exported: the GPU column of free capacity)

PerSlot = tuple[tuple[str, float], ...]  # (host consumable, amount per slot)
Use = tuple[PerSlot, int]  # per-slot consumables, GPUs per host
# The use of a job of slots alone: it takes nothing of any column (most jobs).
SLOTS_ONLY: Final[Use] = ((), 0)


def job_use(per_slot: PerSlot, gpus: int) -> Use:
    """The use of a job with these per-slot consumables and `gpus` GPUs per host."""
    return per_slot, gpus


def host_use(use: Use, slots: int) -> PerSlot:
    """What a job of `use` takes of one host where it has `slots` slots (negative:
    what it gives back there, each amount negated): each per-slot consumable times
    the slots, and its GPUs once (none where it has no slot)."""
    per_slot, gpus = use
    taken = [(res, amount * slots) for res, amount in per_slot]
    if gpus and slots:
        taken.append((NGPUS, float(gpus) if slots > 0 else -float(gpus)))
    return tuple(taken)
