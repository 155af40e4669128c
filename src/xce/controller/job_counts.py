"""Jobs per (state, queue), kept as facts apply, so that what counts them (the
metrics at every scrape) never walks the jobs: the view takes a job out of its
count before a fact changes it and puts it back after (ClusterView.apply)."""

from __future__ import annotations

from collections.abc import Iterator

from xce.model.jobs import JobSpec


class JobCounts:
    """How many jobs the view keeps in each (state, queue): PEND, PSUSP, RUN, DONE,
    EXIT (a stopped running job counts as RUN here; the suspend book knows which)."""

    __slots__ = ("_counts",)

    def __init__(self) -> None:
        self._counts: dict[tuple[str, str], int] = {}

    def put(self, state: str, spec: JobSpec) -> None:
        key = (state, spec.queue)
        self._counts[key] = self._counts.get(key, 0) + 1

    def drop(self, state: str, spec: JobSpec) -> None:
        key = (state, spec.queue)
        left = self._counts[key] - 1
        if left:
            self._counts[key] = left
        else:
            del self._counts[key]

    def items(self) -> Iterator[tuple[tuple[str, str], int]]:
        """((state, queue), count) of every non-empty pair."""
        return iter(list(self._counts.items()))
