"""How many more hosts a template may have: the one rule that the scheduler state, the
policy, the controller (refusing a request) and the provisioner (a provider's runtime
allowance) all apply, each to the counts it has.

Pure: plain numbers in, a number out.
"""

from __future__ import annotations


def template_room(
    template_max: int,
    present: int,
    in_flight: int = 0,
    allowance: int | None = None,
) -> int:
    """New hosts that may still be asked for: `template_max` less the hosts `present`
    and `in_flight`, lowered by a runtime `allowance` (None: no runtime cap); never
    below 0. (The catalog pass spends what it is given as hosts open.)"""
    room = template_max - present - in_flight
    if allowance is not None and allowance < room:
        room = allowance
    return room if room > 0 else 0
