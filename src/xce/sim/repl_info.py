"""The REPL's `info TOPIC` command (`xce.sim.repl`): tables of the last session's
demand and idle supply, of the jobs, hosts and queues, and of the elastic supply with
the policy's recent actions.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from rich.markup import escape
from rich.table import Table

from xce.model.result import SessionResult
from xce.sim.repl_text import (
    ReplError,
    describe_action,
    expected_start,
    hosts_text,
    short_ranges,
    show_number,
    show_time,
    titled_table,
)

if TYPE_CHECKING:
    from xce.sim.repl import Repl

ROWS = 20  # rows shown of long tables
RECENT_ACTIONS = 10


class InfoTables:
    """`info` on a REPL's simulator, shown on its console."""

    def __init__(self, repl: Repl) -> None:
        self.repl = repl
        self.sim = repl.sim
        self.console = repl.console

    def cmd_info(self, args: list[str]) -> None:
        topics: dict[str, Callable[[list[str]], None]] = {
            "demand": self.info_demand, "idle": self.info_idle, "jobs": self.info_jobs,
            "hosts": self.info_hosts, "queues": self.info_queues, "supply": self.info_supply,
        }
        if not args or args[0].lower() not in topics:
            raise ReplError(f"usage: info {'|'.join(topics)}")
        topic = args[0].lower()
        if topic != "jobs" and len(args) > 1:
            raise ReplError(f"usage: info {topic}")
        topics[topic](args[1:])

    def _last(self) -> SessionResult:
        result = self.sim.last_result
        if result is None:
            raise ReplError("no session has run yet (try: step)")
        return result

    def info_demand(self, args: list[str]) -> None:
        del args
        result = self._last()
        demand = result.demand
        where = f"session at {show_time(result.now)}"
        if not (demand.hosts or demand.resources or demand.surplus_hosts
                or demand.surplus_tokens):
            self.repl.say(f"no demand in the {where}")
            return
        self.repl.say(f"demand of the {where}:")
        self._print_table(
            titled_table("Hosts", "TEMPLATE", "NEW", "IN FLIGHT USED", "JOBS",
                         right=("NEW", "IN FLIGHT USED")),
            [(h.template, str(h.count), str(h.in_flight_used), short_ranges(h.jobs))
             for h in demand.hosts])
        self._print_table(
            titled_table("Tokens", "POOL", "AMOUNT", "IN FLIGHT USED", "JOBS",
                         right=("AMOUNT", "IN FLIGHT USED")),
            [(r.resource, show_number(r.amount), show_number(r.in_flight_used),
              short_ranges(r.jobs)) for r in demand.resources])
        for s in demand.surplus_hosts:
            self.repl.say(f"surplus: {s.count} in-flight hosts of {s.template} that no job needs")
        for t in demand.surplus_tokens:
            self.repl.say(f"surplus: {show_number(t.amount)} tokens of {t.resource} in flight "
                          "that no job needs")

    def info_idle(self, args: list[str]) -> None:
        del args
        result = self._last()
        idle = result.idle
        where = f"session at {show_time(result.now)}"
        if not (idle.hosts or idle.resources):
            self.repl.say(f"no idle supply in the {where}")
            return
        self.repl.say(f"idle supply of the {where}:")
        if idle.hosts:
            table = titled_table("Hosts", "HOST", "TEMPLATE", "IDLE FOR", right=("IDLE FOR",))
            for h in idle.hosts[:ROWS]:
                table.add_row(h.host, h.template, f"{show_number(h.idle_for)} s")
            self.console.print(table)
            self._more(len(idle.hosts), "idle hosts")
        self._print_table(titled_table("Tokens", "POOL", "IDLE TOKENS", right=("IDLE TOKENS",)),
                          [(r.resource, show_number(r.amount)) for r in idle.resources])

    def _print_table(self, table: Table, rows: list[tuple[str, ...]]) -> None:
        """`table` with these rows, printed; nothing when there is no row."""
        if rows:
            for row in rows:
                table.add_row(*row)
            self.console.print(table)

    def _more(self, total: int, what: str) -> None:
        if total > ROWS:
            self.repl.say(f"... {total - ROWS} more {what} not shown ({total} in all)")

    def info_jobs(self, args: list[str]) -> None:
        if len(args) > 1 or (args and args[0].lower() not in ("pending", "running")):
            raise ReplError("usage: info jobs [pending|running]")
        which = args[0].lower() if args else "both"
        if which in ("pending", "both"):
            self._pending_jobs()
        if which in ("running", "both"):
            self._running_jobs()

    def _pending_jobs(self) -> None:
        state = self.sim.state
        jobs = sorted([*state.pending.values(), *state.held.values(), *state.waiting.values()],
                      key=lambda j: j.key)
        if not jobs:
            self.repl.say(f"no pending jobs at {show_time(self.repl.now)}")
            return
        result = self.sim.last_result
        # The last session's plan: when each reserved job is expected to start.
        expected: dict[int, str] = {}
        if result is not None:
            for found in result.reservations:
                expected[found.job] = expected_start(found)
        # Jobs by pend reason (and expected start), in scheduling order.
        groups: dict[tuple[str, str], list[int]] = {}
        for job in jobs:
            reason = result.reason_of(job.id) if result is not None else None
            key = (reason or "(submitted since the last session)", expected.get(job.id, "-"))
            groups.setdefault(key, []).append(job.id)
        columns = ["JOBS", "COUNT", "PEND REASON"]
        if expected:
            columns.append("EXPECTED START")
        table = titled_table(f"Pending jobs: {len(jobs)}", *columns, right=("COUNT",))
        for (reason, start), ids in list(groups.items())[:ROWS]:
            row = [short_ranges(ids), str(len(ids)), escape(reason)]
            if expected:
                row.append(start)
            table.add_row(*row)
        self.console.print(table)
        self._more(len(groups), "pend reasons")

    def _running_jobs(self) -> None:
        state = self.sim.state
        running = sorted(state.running.values(), key=lambda r: (r.start, r.spec.id))
        if not running:
            self.repl.say(f"no running jobs at {show_time(self.repl.now)}")
            return
        table = titled_table(f"Running jobs: {len(running)}", "JOBID", "USER", "QUEUE", "SLOTS",
                             "STARTED", "EXEC_HOST", right=("JOBID", "SLOTS", "STARTED"))
        for run in running[:ROWS]:
            hosts = hosts_text((host.name if (host := state.hosts[index]) else "?", slots)
                               for index, slots in run.hosts.items())
            table.add_row(str(run.spec.id), run.spec.user, run.spec.queue, str(run.spec.n),
                          show_number(run.start), hosts)
        self.console.print(table)
        self._more(len(running), "running jobs")

    def info_hosts(self, args: list[str]) -> None:
        del args
        state = self.sim.state
        groups: dict[str, list[Any]] = {}
        for host in state.live_hosts():
            groups.setdefault(host.template or "(static)", []).append(host)
        table = titled_table(f"Hosts at {show_time(self.repl.now)}", "GROUP", "HOSTS", "OPEN",
                             "CLOSED", "SLOTS", "BUSY", "IN FLIGHT",
                             right=("HOSTS", "OPEN", "CLOSED", "SLOTS", "BUSY", "IN FLIGHT"))
        names = ["(static)", *sorted(self.sim.templates)]
        for name in names:
            hosts = groups.get(name, [])
            if not hosts and not state.in_flight.get(name) and name != "(static)":
                continue
            slots = sum(h.slots for h in hosts)
            busy = sum(sum(h.running.values()) for h in hosts)
            opened = sum(1 for h in hosts if h.is_open)
            table.add_row(name, str(len(hosts)), str(opened), str(len(hosts) - opened),
                          str(slots), str(busy), str(state.in_flight.get(name, 0)))
        self.console.print(table)
        provisioned = sorted(state.provisioned.values(), key=lambda h: h.index)
        if not provisioned:
            return
        table = titled_table("Provisioned hosts", "HOST", "TEMPLATE", "STATE", "SLOTS", "BUSY",
                             "JOINED", "IDLE SINCE",
                             right=("SLOTS", "BUSY", "JOINED", "IDLE SINCE"))
        for host in provisioned[:ROWS]:
            busy = sum(host.running.values())
            table.add_row(host.name, host.template or "", host.state, str(host.slots),
                          str(busy), show_number(host.joined),
                          "-" if host.running else show_number(host.idle_since))
        self.console.print(table)
        self._more(len(provisioned), "provisioned hosts")

    def info_queues(self, args: list[str]) -> None:
        del args
        state = self.sim.state
        pending: dict[str, int] = {}
        for job in [*state.pending.values(), *state.held.values(), *state.waiting.values()]:
            pending[job.spec.queue] = pending.get(job.spec.queue, 0) + 1
        running: dict[str, int] = {}
        slots: dict[str, int] = {}
        for run in state.running.values():
            running[run.spec.queue] = running.get(run.spec.queue, 0) + 1
            slots[run.spec.queue] = slots.get(run.spec.queue, 0) + run.spec.n
        table = titled_table(f"Queues at {show_time(self.repl.now)}", "QUEUE", "PRIO", "PEND",
                             "RUN", "RUN SLOTS", "HOSTS",
                             right=("PRIO", "PEND", "RUN", "RUN SLOTS"))
        for queue in sorted(state.queues.values(), key=lambda q: (-q.priority, q.name)):
            hosts = "every host and template" if queue.hosts is None else " ".join(queue.hosts)
            table.add_row(queue.name, str(queue.priority), str(pending.get(queue.name, 0)),
                          str(running.get(queue.name, 0)), str(slots.get(queue.name, 0)),
                          escape(hosts))
        self.console.print(table)

    def info_supply(self, args: list[str]) -> None:
        del args
        sim, state = self.sim, self.sim.state
        if not sim.templates and not sim.pools:
            self.repl.say("no elastic supply: the cluster has no templates and no countables")
            return
        backoff = sim.memory.backoff_until
        if sim.templates:
            table = titled_table(f"Hosts at {show_time(self.repl.now)}", "TEMPLATE", "PRESENT",
                                 "IN FLIGHT", "MAX", "ALLOWANCE", "BACKED OFF UNTIL",
                                 right=("PRESENT", "IN FLIGHT", "MAX", "ALLOWANCE"))
            for name, template in sorted(sim.templates.items()):
                until = backoff.get(name)
                table.add_row(
                    name, str(state.template_alive(name)), str(sim.in_flight.get(name, 0)),
                    str(template.max), str(state.allowance.get(name, "-")),
                    show_number(until) if until is not None and until > self.repl.now else "-",
                )
            self.console.print(table)
        if sim.pools:
            table = titled_table("Tokens", "POOL", "IN FLIGHT", "BORROWED", "USED",
                                 right=("IN FLIGHT", "BORROWED", "USED"))
            for key in sorted(sim.pools):
                pool = state.pool_by_key(key)
                table.add_row(key, show_number(sim.tokens_in_flight.get(key, 0.0)),
                              show_number(sim.borrowed.get(key, 0.0)), show_number(pool.used))
            self.console.print(table)
        actions = sim.actions_log[-RECENT_ACTIONS:]
        if not actions:
            self.repl.say("no policy actions yet")
            return
        table = titled_table(f"Policy actions: last {len(actions)} of {len(sim.actions_log)}",
                             "TIME", "ACTION", "REASON", right=("TIME",))
        for when, action in actions:
            table.add_row(show_number(when), escape(describe_action(action)),
                          escape(action.reason))
        self.console.print(table)
