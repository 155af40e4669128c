"""Amounts of consumables and tokens are floats: sums of them may miss by a rounding
error. One tolerance for every comparison of such amounts, in every layer."""

from __future__ import annotations

from typing import Final

EPSILON: Final = 1e-9  # a shortfall or surplus below this is rounding, not real
