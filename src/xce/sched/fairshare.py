"""LSF user-based fairshare: each fairshare queue's share tree, the usage history its
users build up (from job starts and ends, as events bring them), and their dynamic
priorities at a given time (docs/scheduling.md, "Fairshare").

A user's account is the first of: their own entry, the first `group:NAME` entry
whose group lists them (a group is one account: its members' usage adds up; within
it each member has an equal part of its shares), `default` (an account of their
own with the default shares), else an account of their own with no shares
(priority 0: their jobs come after every user that has shares).

    dynamic priority = shares / (cpu_time x CPU_TIME_FACTOR + run_time x RUN_TIME_FACTOR
                                 + (1 + running slots) x RUN_JOB_FACTOR)

cpu_time: the slot-hours of the account's ended jobs (slots x hours run: the
scheduler's events carry no CPU time), each counted when the job ended and decayed
with a half-life of `hist_hours` since; run_time: the slot-hours its running jobs
have run so far; running slots: their slots. Every figure is computed by the
functions below, in a fixed order, from the events and the session's clock: the same
events give the same floating-point priorities live, simulated and replayed.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Final

from xce.model.api import QueueShares, ShareRow
from xce.model.cluster import ClusterConfig, FairshareFactors, Queue
from xce.model.events import ShareUsage

HOUR: Final = 3600.0
GROUP_PREFIX: Final = "group:"  # (xce.config.groups.USER_GROUP_PREFIX: config is below)
DEFAULT_USER: Final = "default"
# Merge keys of a session with fairshare queues: the first field of a job's sort key
# (-queue priority) times RANK_SPAN plus its user's rank in its queue (0 first); jobs
# of queues without fairshare rank last (RANK_SPAN - 1) among those of their priority.
RANK_SPAN: Final = 1 << 32
NO_RANK: Final = RANK_SPAN - 1


class Account:
    """Who shares a queue's shares: a user, or a user group as a whole."""

    __slots__ = ("members", "name", "shares")

    def __init__(self, name: str, shares: float, members: tuple[str, ...]) -> None:
        self.name = name  # a user name, or group:NAME
        self.shares = shares
        self.members = members  # the users whose usage it adds up


class ShareTree:
    """A queue's shares as written (`fairshare:`), with the user groups expanded."""

    __slots__ = ("_default", "_groups", "_users", "written")

    def __init__(
        self, written: tuple[tuple[str, float], ...], user_groups: Mapping[str, tuple[str, ...]]
    ) -> None:
        self.written = written
        self._users: dict[str, Account] = {}  # own entries
        self._groups: dict[str, Account] = {}  # member -> the first group listing them
        self._default = 0.0
        for name, shares in written:
            if name.startswith(GROUP_PREFIX):
                members = user_groups.get(name[len(GROUP_PREFIX):], ())
                group = Account(name, shares, members)
                for member in members:
                    self._groups.setdefault(member, group)
            elif name == DEFAULT_USER:
                self._default = shares
            else:
                self._users[name] = Account(name, shares, (name,))

    def account(self, user: str) -> Account:
        """`user`'s account (see the module's docstring)."""
        found = self._users.get(user) or self._groups.get(user)
        if found is None:
            found = Account(user, self._default, (user,))
        return found

    def member_shares(self, user: str) -> float:
        """`user`'s own shares: their account's, divided equally among a group's members."""
        account = self.account(user)
        return account.shares / len(account.members)

    def named(self) -> list[str]:
        """The users the shares name, themselves or by their group, in order written."""
        users: dict[str, None] = dict.fromkeys(self._users)
        for name, _shares in self.written:
            if name.startswith(GROUP_PREFIX):
                for account in self._groups.values():
                    if account.name == name:
                        users.update(dict.fromkeys(account.members))
        return list(users)


class UserUsage:
    """One user's usage in one fairshare queue."""

    __slots__ = ("as_of", "hist", "running")

    def __init__(self, hist: float = 0.0, as_of: float = 0.0) -> None:
        self.hist = hist  # slot-hours of ended jobs, decayed to `as_of`
        self.as_of = as_of
        self.running: dict[int, tuple[int, float]] = {}  # job -> (slots, start)


class Fairshare:
    """The fairshare queues' trees and their users' usage (kept in the scheduler state,
    fed by its job events)."""

    __slots__ = ("factors", "trees", "usage")

    def __init__(self) -> None:
        self.trees: dict[str, ShareTree] = {}  # fairshare queue -> its shares
        self.factors = FairshareFactors()
        self.usage: dict[tuple[str, str], UserUsage] = {}  # (queue, user) -> usage

    def configure(self, config: ClusterConfig) -> None:
        """A (new) configuration: its trees and factors; the history of ended jobs is
        kept, running jobs are counted again as they are restarted."""
        self.factors = config.fairshare
        self.trees = {
            q.name: ShareTree(q.fairshare, config.user_groups)
            for q in config.queues
            if q.fairshare is not None
        }
        for usage in self.usage.values():
            usage.running = {}

    def _usage(self, queue: str, user: str) -> UserUsage:
        found = self.usage.get((queue, user))
        if found is None:
            found = self.usage[(queue, user)] = UserUsage()
        return found

    def started(self, queue: str, user: str, job: int, slots: int, time: float) -> None:
        if queue in self.trees:
            self._usage(queue, user).running[job] = (slots, time)

    def ended(self, queue: str, user: str, job: int, time: float) -> None:
        """A job stopped running (finished, killed or requeued): its slot-hours join
        the history as of `time`."""
        usage = self.usage.get((queue, user))
        if usage is None or job not in usage.running:
            return
        slots, start = usage.running.pop(job)
        used = slots * max(0.0, time - start) / HOUR
        if time > usage.as_of:
            usage.hist = self.decayed(usage, time)
            usage.as_of = time
        usage.hist += used

    def decayed(self, usage: UserUsage, now: float) -> float:
        """The history's slot-hours as of `now` (halved every `hist_hours`)."""
        if now <= usage.as_of or not usage.hist:
            return usage.hist
        half_lives = (now - usage.as_of) / (self.factors.hist_hours * HOUR)
        return usage.hist * math.pow(0.5, half_lives)  # (libm's pow, compiled or not)

    def restore(self, records: Iterable[ShareUsage]) -> None:
        """The history as a rebuilt state carries it (`FairshareRestored`)."""
        for record in records:
            usage = self._usage(record.queue, record.user)
            usage.hist, usage.as_of = record.hist, record.as_of

    def history(self) -> list[ShareUsage]:
        """The history of ended jobs, for the events that rebuild a state."""
        return [
            ShareUsage(queue, user, usage.hist, usage.as_of)
            for (queue, user), usage in self.usage.items()
            if usage.hist
        ]

    def figures(self, queue: str, users: Iterable[str], now: float) -> tuple[float, float, int]:
        """(cpu_time, run_time in slot-hours, running slots) of `users` in `queue`."""
        cpu, run, slots = 0.0, 0.0, 0
        for user in users:
            usage = self.usage.get((queue, user))
            if usage is None:
                continue
            cpu += self.decayed(usage, now)
            for used, start in usage.running.values():
                run += used * max(0.0, now - start) / HOUR
                slots += used
        return cpu, run, slots

    def priority(self, shares: float, cpu: float, run: float, slots: int) -> float:
        """LSF's dynamic priority of an account."""
        f = self.factors
        return shares / (
            cpu * f.cpu_time_factor + run * f.run_time_factor + (1 + slots) * f.run_job_factor
        )

    def standing(self, queue: str, user: str, now: float) -> tuple[float, float]:
        """(the dynamic priority of `user`'s account, theirs within it): who goes first
        in `queue` (higher first; a group's members by the second)."""
        tree = self.trees[queue]
        account = tree.account(user)
        top = self.priority(account.shares, *self.figures(queue, account.members, now))
        if len(account.members) == 1:
            return top, top
        own = self.priority(tree.member_shares(user), *self.figures(queue, (user,), now))
        return top, own

    def table(self, queue: str, pending: Mapping[str, int], now: float) -> QueueShares:
        """`queue`'s users (named by its shares, with usage, or with jobs `pending`:
        user -> jobs), highest priority first (then by name)."""
        tree, f = self.trees[queue], self.factors
        users = dict.fromkeys(tree.named())
        users.update(dict.fromkeys(u for (q, u) in self.usage if q == queue))
        users.update(dict.fromkeys(pending))
        rows: list[ShareRow] = []
        for user in users:
            account = tree.account(user)
            cpu, run, started = self.figures(queue, account.members, now)
            top, own = self.standing(queue, user, now)
            rows.append(
                ShareRow(
                    user, account.name, account.shares, tree.member_shares(user), cpu, run,
                    started, top, own if len(account.members) > 1 else None,
                    pending.get(user, 0),
                )
            )
        rows.sort(key=lambda r: (-r.priority, -(r.priority_within or 0.0), r.user))
        return QueueShares(
            queue, [(n, s) for n, s in tree.written], f.cpu_time_factor, f.run_time_factor,
            f.run_job_factor, f.hist_hours, rows,
        )

    def ranks(self, queue: str, users: Iterable[str], now: float) -> dict[str, int]:
        """`users` of `queue` ranked by standing (0 first; equal standings share a rank,
        their jobs then ordered by job priority, submit time and id)."""
        standings = sorted(
            ((self.standing(queue, user, now), user) for user in users),
            key=lambda s: (-s[0][0], -s[0][1]),
        )
        ranks: dict[str, int] = {}
        rank, last = -1, (-1.0, -1.0)
        for standing, user in standings:
            if standing != last:
                rank, last = rank + 1, standing
            ranks[user] = rank
        return ranks


def share_user(queue: Queue, user: str) -> str:
    """The user a job's bucket is kept for: its user in a fairshare queue (its jobs are
    ordered by their user's priority), else "" (one bucket for every user)."""
    return user if queue.fairshare is not None else ""
