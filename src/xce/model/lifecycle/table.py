"""One transition table type for every lifecycle: `Lifecycle`, with `TransitionError`.

A table maps each allowed edge `(from, to)` to the reason recorded when the change
gives none more specific. It answers whether a change is allowed, the reason to record,
and, for a fact written before facts carried a cause (release 0.1), the cause its
stored reason stands for (`stored`): the one place a reason's text is read, and only
for such old facts.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from enum import StrEnum
from typing import Generic, TypeVar

from xce.model.causes import Cause

S = TypeVar("S", bound=StrEnum)


class TransitionError(ValueError):
    """A change the lifecycle's table does not allow (its message names the allowed
    targets)."""


class Lifecycle(Generic[S]):
    """The states of one kind of thing (`subject`: "host", "request"), the edges allowed
    between them with a reason each, and the states it ends in."""

    __slots__ = ("_causes", "_choices", "_reasons", "edges", "final", "states", "subject")

    def __init__(
        self,
        subject: str,
        states: type[S],
        edges: Mapping[tuple[S, S], str],
        final: Iterable[S] = (),
        choices: Mapping[tuple[S, S], tuple[str, tuple[str, ...]]] | None = None,
        stored: Mapping[tuple[S, str], Cause] | None = None,
    ) -> None:
        """`choices`: edges whose given reason must be one of a few words (what they
        are called, the words); `stored`: (state, reason) -> the cause a fact written
        without a cause meant."""
        self.subject = subject
        self.states = states
        self.edges: dict[tuple[S, S], str] = dict(edges)
        self.final: tuple[S, ...] = tuple(final)
        for (current, target), reason in self.edges.items():
            if not reason or current not in states or target not in states:
                raise ValueError(f"{subject} lifecycle: bad edge {current} -> {target}")
        # (looked up by the plain strings facts and records hold)
        self._reasons: dict[tuple[str, str], str] = {edge: r for edge, r in edges.items()}
        self._choices: dict[tuple[str, str], tuple[str, tuple[str, ...]]] = {
            edge: choice for edge, choice in (choices or {}).items()}
        self._causes: dict[tuple[str, str], Cause] = {
            key: cause for key, cause in (stored or {}).items()}

    def targets(self, current: str) -> list[S]:
        """The states `current` may become, by name."""
        return sorted(t for (f, t) in self.edges if f == current)

    def allows(self, current: str, target: str) -> bool:
        return (current, target) in self._reasons

    def stored_causes(self) -> dict[tuple[str, str], Cause]:
        """(state, reason) -> the cause a fact written without one meant."""
        return dict(self._causes)

    def reason_for(self, name: str, current: str, target: str, reason: str = "") -> str:
        """The reason to record for `name` going `current -> target`: `reason`, else
        the edge's own; TransitionError when the table has no such edge (or `reason`
        is not one of the edge's choices)."""
        default = self._reasons.get((current, target))
        if default is None:
            allowed = ", ".join(self.targets(current)) or "nothing"
            raise TransitionError(f"{self.subject} {name} is {current}: it cannot become "
                                  f"{target} (from {current}: {allowed})")
        choice = self._choices.get((current, target))
        if choice is not None and reason and reason not in choice[1]:
            raise TransitionError(f"{self.subject} {name}: {choice[0]} must be one of "
                                  f"{', '.join(choice[1])}")
        return reason or default

    def cause_of(self, state: str, reason: str, cause: Cause | None = None) -> Cause | None:
        """The cause of a change to `state`: `cause`, the one its fact carries; for a
        fact written without one, the cause its stored reason stands for (`stored`),
        if any."""
        if cause is not None:
            return cause
        return self._causes.get((state, reason))
