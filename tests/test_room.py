"""A template's room (`xce.sched.room.template_room`): the one rule for how many more
hosts of a template may be asked for, that the scheduler, the policy, the controller
and the provisioner all apply."""

from xce.sched.room import template_room


def test_room_is_the_max_less_present_and_in_flight() -> None:
    assert template_room(10, 3, 2) == 5, "max 10 less 3 present and 2 in flight"


def test_a_runtime_allowance_lowers_the_room_but_never_raises_it() -> None:
    assert template_room(10, 3, allowance=2) == 2, "an allowance of 2 caps a room of 7"
    assert template_room(10, 3, allowance=9) == 7, "an allowance above the room is no cap"
    assert template_room(10, 3, allowance=0) == 0, "an allowance of 0 (backed off) stops all"


def test_room_is_never_negative() -> None:
    assert template_room(4, 5, 1) == 0, "more hosts than the max: no room, not less"
