"""The ledger of borrowed tokens, per countable pool ("vcs", "hspice/cloud").

Tokens of a pool are, from the lender's side, in one of three places (the states of
`TOKEN_LIFE`, xce.model.lifecycle, but `lender`):

* `in_flight`: asked for, no answer yet; not usable.
* `borrowed`: granted; part of the pool's total, so jobs may be given them.
* `returning`: a return was asked for. They left the total at once (no new job gets
  them) but running jobs may still hold them; the return completes (`returned`) only
  once the pool's tokens in use fit within what is left.

Each step (`TOKEN_STEPS`) moves an amount along one edge of the table. The ledger is
built from `TokensChanged` facts in log order, so that recovery rebuilds it, and is
kept in the controller's snapshots. `refusal` says whether a step is legal now; the
controller logs only legal steps, so applying a logged step never fails. Pure: no I/O,
no clock.
"""

from __future__ import annotations

import logging
import math

import msgspec

from xce.model.amounts import EPSILON
from xce.model.events import Event, TokensChanged
from xce.model.lifecycle import TOKEN_STEPS, TokenState, TokenStep

log = logging.getLogger("xce.controller.tokens")


# What the API calls each step a caller may ask for (`returned` is the controller's).
API_STEPS = {"borrow": TokenStep.BORROW_REQUESTED, "grant": TokenStep.GRANTED,
             "refuse": TokenStep.REFUSED, "return": TokenStep.RETURN_REQUESTED}
_VERBS = {TokenStep.BORROW_REQUESTED: "borrow", TokenStep.GRANTED: "grant",
          TokenStep.REFUSED: "refuse", TokenStep.RETURN_REQUESTED: "return",
          TokenStep.RETURNED: "complete the return of"}


class PoolTokens(msgspec.Struct):
    """One pool's borrowed tokens (kept in controller snapshots)."""

    in_flight: float = 0.0
    borrowed: float = 0.0
    returning: float = 0.0

    def amount(self, place: TokenState) -> float:
        """The tokens in `place` (none is kept for the lender)."""
        if place is TokenState.LENDER:
            return 0.0
        value: float = getattr(self, place)
        return value


def _tidy(value: float) -> float:
    """0 for what is 0 but for a rounding error."""
    return 0.0 if abs(value) < EPSILON else value


class TokenLedger:
    """Borrowed tokens of every countable pool, by pool key."""

    # The facts `apply` follows (the kernel hands it no other: controller/kernel.py)
    FOLLOWS: tuple[type[Event], ...] = (TokensChanged,)

    def __init__(self) -> None:
        self.pools: dict[str, PoolTokens] = {}

    def of(self, pool: str) -> PoolTokens:
        """The pool's tokens (all 0 for a pool never borrowed for)."""
        return self.pools.get(pool) or PoolTokens()

    def refusal(self, pool: str, step: str, amount: float) -> str | None:
        """Why `step` of `amount` tokens is illegal now, or None when it is legal."""
        if step not in TOKEN_STEPS:
            return f"unknown step {step!r} (steps: {', '.join(TOKEN_STEPS)})"
        if not math.isfinite(amount) or amount <= 0:
            return f"the amount must be a number above 0, not {amount:g}"
        source = TOKEN_STEPS[TokenStep(step)][0]
        if source is TokenState.LENDER:
            return None
        have = self.of(pool).amount(source)
        if amount > have + EPSILON:
            where = source.replace("_", " ")
            return (f"cannot {_VERBS[TokenStep(step)]} {amount:g} tokens of {pool}: "
                    f"{have:g} {where}")
        return None

    def after(self, pool: str, step: str, amount: float) -> PoolTokens:
        """The pool's tokens after `step` (not applied). Never below 0."""
        source, target = TOKEN_STEPS[TokenStep(step)]
        tokens = msgspec.structs.replace(self.of(pool))
        if source is not TokenState.LENDER:
            setattr(tokens, source, _tidy(max(0.0, tokens.amount(source) - amount)))
        if target is not TokenState.LENDER:
            setattr(tokens, target, _tidy(tokens.amount(target) + amount))
        return tokens

    def apply(self, event: Event) -> None:
        """Follow one fact (only `TokensChanged` matters here)."""
        if not isinstance(event, TokensChanged):
            return
        why = self.refusal(event.pool, event.step, event.amount)
        if event.step not in TOKEN_STEPS:
            log.error("ignoring a token step of %s: %s", event.pool, why)
            return
        if why is not None:  # logged facts were legal when logged: a bug, keep going
            log.error("token step %s of %s does not fit the ledger: %s",
                      event.step, event.pool, why)
        tokens = self.after(event.pool, event.step, event.amount)
        if tokens == PoolTokens():
            self.pools.pop(event.pool, None)
        else:
            self.pools[event.pool] = tokens

    def returning(self) -> list[tuple[str, float]]:
        """Pools with a return under way, and how many tokens they are giving back."""
        return [(pool, t.returning) for pool, t in self.pools.items() if t.returning > 0]

    def snapshot(self) -> dict[str, PoolTokens]:
        return {pool: msgspec.structs.replace(t) for pool, t in self.pools.items()}

    def restore(self, pools: dict[str, PoolTokens]) -> None:
        self.pools = {pool: msgspec.structs.replace(t) for pool, t in pools.items()}
