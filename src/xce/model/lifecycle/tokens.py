"""The lifecycle of borrowed tokens (controller/tokens.py keeps the ledger): where the
tokens of a countable pool are, and the steps that move an amount between two places.

    lender -> in_flight -> borrowed -> returning -> lender;  in_flight -> lender

Tokens have states, though the ledger keeps amounts, not single tokens: each amount of
a pool is in one place, and a step (`TokensChanged.step`, stored as its name) moves an
amount along one edge. `lender` is where tokens are before they are borrowed and after
they are given back; the ledger keeps no amount for it (the other places are the
fields of `PoolTokens`).
"""

from __future__ import annotations

from enum import StrEnum

from xce.model.lifecycle.table import Lifecycle


class TokenState(StrEnum):
    LENDER = "lender"  # not borrowed (no amount is kept for it)
    IN_FLIGHT = "in_flight"  # asked for, no answer yet: not usable
    BORROWED = "borrowed"  # granted: part of the pool's total
    RETURNING = "returning"  # out of the total; jobs may still hold them


class TokenStep(StrEnum):
    """A step of borrowing or returning, as `TokensChanged` facts store it."""

    BORROW_REQUESTED = "borrow_requested"
    GRANTED = "granted"
    REFUSED = "refused"
    RETURN_REQUESTED = "return_requested"
    RETURNED = "returned"


TOKEN_LIFE: Lifecycle[TokenState] = Lifecycle(
    "tokens of pool",
    TokenState,
    {
        (TokenState.LENDER, TokenState.IN_FLIGHT):
            "the provisioner asked the lender for tokens",
        (TokenState.IN_FLIGHT, TokenState.BORROWED):
            "the lender gave them: the pool's total grows",
        (TokenState.IN_FLIGHT, TokenState.LENDER): "the lender will not give them",
        (TokenState.BORROWED, TokenState.RETURNING):
            "out of the total at once; the jobs that hold them run on",
        (TokenState.RETURNING, TokenState.LENDER):
            "no job holds them any more: given back to the lender",
    },
)

# Each step's edge: where its amount comes from, where it goes.
TOKEN_STEPS: dict[TokenStep, tuple[TokenState, TokenState]] = {
    TokenStep.BORROW_REQUESTED: (TokenState.LENDER, TokenState.IN_FLIGHT),
    TokenStep.GRANTED: (TokenState.IN_FLIGHT, TokenState.BORROWED),
    TokenStep.REFUSED: (TokenState.IN_FLIGHT, TokenState.LENDER),
    TokenStep.RETURN_REQUESTED: (TokenState.BORROWED, TokenState.RETURNING),
    TokenStep.RETURNED: (TokenState.RETURNING, TokenState.LENDER),
}
