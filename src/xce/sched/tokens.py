"""Tokens in the catalog pass: those of countable pools that are in flight or could
be borrowed (headroom), and covering a job's shared needs with them."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from itertools import product

from xce.sched.buckets import Bucket
from xce.sched.capacity import EPSILON, Capacity
from xce.sched.failure import Failure
from xce.sched.pools import PoolRecord
from xce.sched.reasons import RESOURCE
from xce.sched.state import SchedulerState


class TokenSupply:
    """Tokens of one pool that are in flight or could be borrowed."""

    __slots__ = ("from_headroom", "from_in_flight", "headroom", "in_flight", "jobs", "pool")

    def __init__(self, pool: PoolRecord) -> None:
        self.pool = pool
        self.in_flight = pool.tokens_in_flight
        self.headroom = pool.available_headroom()
        self.from_in_flight = 0.0
        self.from_headroom = 0.0
        self.jobs: list[int] = []


class TokenUse:
    """Tokens one job takes from a pool: `short` of them are not there yet."""

    __slots__ = ("amount", "from_headroom", "from_in_flight", "pool", "supply")

    def __init__(
        self,
        pool: PoolRecord,
        supply: TokenSupply | None,
        amount: float,
        from_in_flight: float = 0.0,
        from_headroom: float = 0.0,
    ) -> None:
        self.pool = pool
        self.supply = supply
        self.amount = amount
        self.from_in_flight = from_in_flight
        self.from_headroom = from_headroom

    @property
    def short(self) -> float:
        return self.from_in_flight + self.from_headroom


def cover(
    state: SchedulerState, cap: Capacity, tokens: dict[PoolRecord, TokenSupply],
    bucket: Bucket, reachable: Callable[[PoolRecord], bool],
) -> list[TokenUse] | Failure:
    """Tokens for the job's shared needs: free ones, then in flight, then headroom."""
    uses: list[TokenUse] = []
    for res, amount in bucket.shared:
        best_short = amount
        headroom = 0.0
        for pool in state.pools[res]:
            if not reachable(pool):
                continue
            free = max(0.0, cap.pool_free[pool])
            short = max(0.0, amount - free)
            supply = tokens.get(pool)
            if short <= EPSILON:
                uses.append(TokenUse(pool, supply, amount))
                break
            if supply is None:
                best_short = min(best_short, short)
                continue
            from_in_flight = min(short, supply.in_flight)
            from_headroom = short - from_in_flight
            if from_headroom <= supply.headroom + EPSILON:
                uses.append(TokenUse(pool, supply, amount, from_in_flight, from_headroom))
                break
            best_short = min(best_short, short)
            headroom = max(headroom, supply.headroom)
        else:
            return Failure(
                RESOURCE, "tokens",
                f"Short {best_short:g} of {res}: not enough headroom to borrow "
                f"({headroom:g} left)",
            )
    return uses


def lending(
    state: SchedulerState, cap: Capacity, tokens: dict[PoolRecord, TokenSupply],
    bucket: Bucket,
) -> Iterator[tuple[PoolRecord, ...]]:
    """Each choice of one pool per shared resource of the job, in configured order,
    among the pools that could cover its request with free, in-flight and borrowable
    tokens."""
    choices: list[list[PoolRecord]] = []
    for res, amount in bucket.shared:
        choices.append([p for p in state.pools[res] if _could_cover(cap, tokens, p, amount)])
    return product(*choices)


def _could_cover(
    cap: Capacity, tokens: dict[PoolRecord, TokenSupply], pool: PoolRecord, amount: float
) -> bool:
    supply = tokens.get(pool)
    more = 0.0 if supply is None else supply.in_flight + supply.headroom
    return max(0.0, cap.pool_free[pool]) + more + EPSILON >= amount
