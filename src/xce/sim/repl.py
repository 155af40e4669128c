"""`xce sim repl`: drive a simulation by hand and look inside the scheduler between
sessions (see docs/simulator.md, "The REPL").

On a terminal the commands are read with prompt_toolkit (history in
~/.xce_sim_history, completion of command words); otherwise they are read line by
line from standard input, so that a session can be scripted:

    printf 'run for 1h\\ninfo demand\\nwhy 42\\n' | xce sim repl --workload jobs.yaml

A bad command prints a one-line error and the prompt goes on. In script mode the
exit status is 1 if any command failed.
"""

from __future__ import annotations

import math
import os
import re
import signal
import sys
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from types import FrameType
from typing import IO, Any

import msgspec
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from xce.model.job_ids import id_ranges
from xce.model.policy import PolicyConfig
from xce.model.recording import Recorder
from xce.model.result import Reservation, SessionResult
from xce.policy import (
    Action,
    DecommissionHost,
    DrainHost,
    RequestHosts,
    RequestTokens,
    ReturnTokens,
    SetAllowance,
)
from xce.sched.rebuild import state_events
from xce.sim.driver import Simulator
from xce.sim.report import format_value, write_report

HISTORY_FILE = "~/.xce_sim_history"
ROWS = 20  # rows shown of long tables
RANGES = 6  # id ranges shown per table cell
RECENT_ACTIONS = 10

HELP = (
    ("run [until T | for D]", "simulate to the end, until time T, or for duration D"),
    ("step [N]", "run the next N scheduling sessions (default 1)"),
    ("info demand", "demand for new hosts and tokens (last session)"),
    ("info idle", "idle provisioned hosts and tokens (last session)"),
    ("info jobs [pending|running]", "pending jobs by pend reason, running jobs"),
    ("info hosts", "hosts by group and state, provisioned hosts"),
    ("info queues", "jobs and slots per queue"),
    ("info supply", "hosts and tokens in flight, borrowed, recent policy actions"),
    ("why JOB", "a job's state; if pending, its reason and decision trace"),
    ("set policy [KEY VALUE]", "show or change a policy knob"),
    ("record FILE | record stop", "record from now on (replayable) / stop"),
    ("report DIR", "write the report (plots and index.html) now"),
    ("summary", "the simulation summary so far"),
    ("help", "this list"),
    ("quit, exit", "leave (closes a recording)"),
)
TIMES = "T and D in seconds or with a suffix: 90s, 10m, 2h, 3d."

POLICY_KEYS = (
    "persistence", "max_requests_per_round", "max_lifetime", "backoff_initial", "backoff_max",
)

WORDS = sorted({
    "run", "until", "for", "step", "info", "demand", "idle", "jobs", "pending", "running",
    "hosts", "queues", "supply", "why", "set", "policy", *POLICY_KEYS, "record", "stop",
    "report", "summary", "help", "quit", "exit",
})

_DURATION = re.compile(r"^(\d+(?:\.\d*)?|\.\d+)([smhd]?)$")
_UNITS = {"": 1.0, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}


class ReplError(Exception):
    """A command that cannot be carried out: the message is shown on one line."""


class _Interrupted(Exception):
    """Ctrl-C during `run`: raised between two simulator steps."""


def parse_time(text: str) -> float:
    """Seconds from `3600`, `90s`, `10m`, `2h`, `1.5d`."""
    found = _DURATION.match(text.strip().lower())
    if found is None:
        raise ReplError(f"bad time '{text}': give seconds or a number with s, m, h or d")
    return float(found.group(1)) * _UNITS[found.group(2)]


def show_time(seconds: float) -> str:
    """`t=5400 (1h30m)`: seconds, and days/hours/minutes/seconds when 60 s or more."""
    if not math.isfinite(seconds):
        return f"t={seconds}"
    text = _num(seconds)
    if seconds < 60:
        return f"t={text}"
    rest = round(seconds)
    parts = []
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60), ("s", 1)):
        count, rest = divmod(rest, size)
        if count:
            parts.append(f"{count}{unit}")
    return f"t={text} ({''.join(parts)})"


def _num(value: float) -> str:
    """A time or an amount without exponent: `2674480`, `12.5`."""
    if math.isfinite(value) and value == int(value):
        return f"{value:.0f}"
    return f"{value:.3f}".rstrip("0")


def _plural(count: int, word: str) -> str:
    return f"{count} {word}{'' if count == 1 else 's'}"


def _short_ranges(jobs: Iterable[int]) -> str:
    return id_ranges(jobs, most=RANGES)


def _table(title: str, *columns: str, right: Iterable[str] = ()) -> Table:
    table = Table(title=title, title_justify="left")
    aligned = set(right)
    for column in columns:
        table.add_column(column, justify="right" if column in aligned else "left")
    return table


# ---------------------------------------------------------------------- recording


# ---------------------------------------------------------------------- the REPL


class Repl:
    """Commands on one simulator; `execute` runs one line."""

    def __init__(
        self, simulator: Simulator, console: Console, errors: Console, interactive: bool = False
    ) -> None:
        self.sim = simulator
        self.interactive = interactive  # Ctrl-C stops `run` and `step`
        self.console = console
        self.errors = errors
        self.clock = simulator.now  # `run until` may end past the last event
        self.recording: Path | None = None
        self.recorder: Recorder | None = None
        self.failed = 0
        self.jobs = {job.id: job for job in simulator.workload.jobs}
        self._interrupted = False
        self.commands: dict[str, Callable[[list[str]], None]] = {
            "run": self.cmd_run, "step": self.cmd_step, "info": self.cmd_info,
            "why": self.cmd_why, "set": self.cmd_set, "record": self.cmd_record,
            "report": self.cmd_report, "summary": self.cmd_summary, "help": self.cmd_help,
        }

    # -------------------------------------------------------------- plumbing
    @property
    def now(self) -> float:
        return max(self.clock, self.sim.now)

    def prompt(self) -> str:
        return f"xce-sim {show_time(self.now).partition(' ')[0]}> "

    def execute(self, line: str) -> bool:
        """Run one command line; False when the user asked to leave."""
        words = line.split()
        if not words or words[0].startswith("#"):
            return True
        name, args = words[0].lower(), words[1:]
        if name in ("quit", "exit"):
            return False
        handler = self.commands.get(name)
        try:
            if handler is None:
                raise ReplError(f"unknown command '{words[0]}' (type help)")
            handler(args)
        except ReplError as err:
            self.error(str(err))
        except OSError as err:
            self.error(f"{err.strerror or err}: {err.filename}" if err.filename else str(err))
        except KeyboardInterrupt:
            self.error("interrupted")
        except Exception as err:  # the simulator itself failed: say so, keep the prompt
            self.error(f"internal error: {type(err).__name__}: {err}")
        return True

    def error(self, message: str) -> None:
        self.failed += 1
        self.errors.print(f"error: {escape(message)}", soft_wrap=True)

    def say(self, message: str) -> None:
        self.console.print(escape(message), soft_wrap=True)

    def close(self) -> None:
        if self.recorder is not None:
            self.recorder.close()
            if self.sim.recorder is self.recorder:
                self.sim.recorder = None
            self.say(f"recording {self.recording} closed")
            self.recorder = None
            self.recording = None

    def _summary(self) -> dict[str, Any]:
        """The summary so far. Simulator.summary() adds the time of hosts still
        provisioned into metrics.host_seconds; it is restored so that asking twice
        (and going on with the run) does not count that time again."""
        saved = dict(self.sim.metrics.host_seconds)
        try:
            return self.sim.summary()
        finally:
            self.sim.metrics.host_seconds = saved

    def _counts(self) -> str:
        state = self.sim.state
        pending = len(state.pending) + len(state.held)
        return f"{pending} pending, {len(state.running)} running"

    # -------------------------------------------------------------- run, step
    def cmd_run(self, args: list[str]) -> None:
        until: float | None
        if not args:
            until = None
        elif len(args) == 2 and args[0].lower() in ("until", "for"):
            value = parse_time(args[1])
            until = value if args[0].lower() == "until" else self.now + value
            if until < self.now:
                raise ReplError(f"{show_time(until)} is in the past: now is {show_time(self.now)}")
        else:
            raise ReplError("usage: run [until T | for D]")
        metrics = self.sim.metrics
        before = (metrics.sessions, len(metrics.started), metrics.finished)
        interrupted = False
        previous = self._catch_interrupt()
        try:
            self.sim.run(until=until, progress=self._progress)
        except _Interrupted:
            interrupted = True
        finally:
            self._restore_interrupt(previous)
        if until is not None and not interrupted:
            self.clock = max(self.clock, until)
        sessions = metrics.sessions - before[0]
        started = len(metrics.started) - before[1]
        finished = metrics.finished - before[2]
        # run() without `until` returns only when the run is over
        over = (until is None and not interrupted) or self.sim.loop.next_time() is None
        done = "; the workload is done" if over else ""
        head = "interrupted at" if interrupted else "now"
        self.say(
            f"{head} {show_time(self.now)}: {_plural(sessions, 'session')}, "
            f"{_plural(started, 'job')} started, {finished} finished; {self._counts()}{done}"
        )

    def _progress(self, now: float) -> None:
        del now
        if self._interrupted:
            raise _Interrupted

    def _catch_interrupt(self) -> Any:
        """On a terminal, Ctrl-C stops `run` and `step` between two simulator steps."""
        self._interrupted = False
        if not self.interactive:
            return None

        def handler(signum: int, frame: FrameType | None) -> None:
            del signum, frame
            self._interrupted = True

        try:
            return signal.signal(signal.SIGINT, handler)
        except ValueError:  # not the main thread
            return None

    def _restore_interrupt(self, previous: Any) -> None:
        if previous is not None:
            signal.signal(signal.SIGINT, previous)

    def cmd_step(self, args: list[str]) -> None:
        if len(args) > 1:
            raise ReplError("usage: step [N]")
        try:
            count = int(args[0]) if args else 1
        except ValueError:
            raise ReplError(f"bad session count '{args[0]}': give a whole number") from None
        if count < 1:
            raise ReplError("the session count must be at least 1")
        ran = 0
        previous = self._catch_interrupt()
        try:
            while ran < count and not self._interrupted:
                if self.sim.step_sessions(1) == 0:
                    break
                ran += 1
        finally:
            self._restore_interrupt(previous)
        self.clock = max(self.clock, self.sim.now)
        result = self.sim.last_result
        if ran == 0 or result is None:
            self.say(f"no session left to run: the workload is done at {show_time(self.now)}")
            return
        if self._interrupted:
            short = f" (interrupted after {ran})"
        else:
            short = f" (the workload is done after {ran})" if ran < count else ""
        self.say(
            f"ran {_plural(ran, 'session')}{short}; session "
            f"{self.sim.metrics.sessions} at {show_time(result.now)}: "
            f"{len(result.dispatch)} dispatched, {self._counts()}"
        )

    # -------------------------------------------------------------- info
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
            self.say(f"no demand in the {where}")
            return
        self.say(f"demand of the {where}:")
        self._print_table(
            _table("Hosts", "TEMPLATE", "NEW", "IN FLIGHT USED", "JOBS",
                   right=("NEW", "IN FLIGHT USED")),
            [(h.template, str(h.count), str(h.in_flight_used), _short_ranges(h.jobs))
             for h in demand.hosts])
        self._print_table(
            _table("Tokens", "POOL", "AMOUNT", "IN FLIGHT USED", "JOBS",
                   right=("AMOUNT", "IN FLIGHT USED")),
            [(r.resource, _num(r.amount), _num(r.in_flight_used), _short_ranges(r.jobs))
             for r in demand.resources])
        for s in demand.surplus_hosts:
            self.say(f"surplus: {s.count} in-flight hosts of {s.template} that no job needs")
        for t in demand.surplus_tokens:
            self.say(f"surplus: {_num(t.amount)} tokens of {t.resource} in flight that no "
                     "job needs")

    def info_idle(self, args: list[str]) -> None:
        del args
        result = self._last()
        idle = result.idle
        where = f"session at {show_time(result.now)}"
        if not (idle.hosts or idle.resources):
            self.say(f"no idle supply in the {where}")
            return
        self.say(f"idle supply of the {where}:")
        if idle.hosts:
            table = _table("Hosts", "HOST", "TEMPLATE", "IDLE FOR", right=("IDLE FOR",))
            for h in idle.hosts[:ROWS]:
                table.add_row(h.host, h.template, f"{_num(h.idle_for)} s")
            self.console.print(table)
            self._more(len(idle.hosts), "idle hosts")
        self._print_table(_table("Tokens", "POOL", "IDLE TOKENS", right=("IDLE TOKENS",)),
                          [(r.resource, _num(r.amount)) for r in idle.resources])

    def _print_table(self, table: Table, rows: list[tuple[str, ...]]) -> None:
        """`table` with these rows, printed; nothing when there is no row."""
        if rows:
            for row in rows:
                table.add_row(*row)
            self.console.print(table)

    def _more(self, total: int, what: str) -> None:
        if total > ROWS:
            self.say(f"... {total - ROWS} more {what} not shown ({total} in all)")

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
        jobs = sorted([*state.pending.values(), *state.held.values()], key=lambda j: j.key)
        if not jobs:
            self.say(f"no pending jobs at {show_time(self.now)}")
            return
        result = self.sim.last_result
        # The last session's plan: when each reserved job is expected to start.
        expected: dict[int, str] = {}
        if result is not None:
            for found in result.reservations:
                expected[found.job] = _expected(found)
        # Jobs by pend reason (and expected start), in scheduling order.
        groups: dict[tuple[str, str], list[int]] = {}
        for job in jobs:
            reason = result.reason_of(job.id) if result is not None else None
            key = (reason or "(submitted since the last session)", expected.get(job.id, "-"))
            groups.setdefault(key, []).append(job.id)
        columns = ["JOBS", "COUNT", "PEND REASON"]
        if expected:
            columns.append("EXPECTED START")
        table = _table(f"Pending jobs: {len(jobs)}", *columns, right=("COUNT",))
        for (reason, start), ids in list(groups.items())[:ROWS]:
            row = [_short_ranges(ids), str(len(ids)), escape(reason)]
            if expected:
                row.append(start)
            table.add_row(*row)
        self.console.print(table)
        self._more(len(groups), "pend reasons")

    def _running_jobs(self) -> None:
        state = self.sim.state
        running = sorted(state.running.values(), key=lambda r: (r.start, r.spec.id))
        if not running:
            self.say(f"no running jobs at {show_time(self.now)}")
            return
        table = _table(f"Running jobs: {len(running)}", "JOBID", "USER", "QUEUE", "SLOTS",
                       "STARTED", "EXEC_HOST", right=("JOBID", "SLOTS", "STARTED"))
        for run in running[:ROWS]:
            hosts = []
            for index, slots in run.hosts.items():
                host = state.hosts[index]
                hosts.append(f"{slots}*{host.name if host else '?'}")
            table.add_row(str(run.spec.id), run.spec.user, run.spec.queue, str(run.spec.n),
                          _num(run.start), " ".join(hosts))
        self.console.print(table)
        self._more(len(running), "running jobs")

    def info_hosts(self, args: list[str]) -> None:
        del args
        state = self.sim.state
        groups: dict[str, list[Any]] = {}
        for host in state.live_hosts():
            groups.setdefault(host.template or "(static)", []).append(host)
        table = _table(f"Hosts at {show_time(self.now)}", "GROUP", "HOSTS", "OPEN", "CLOSED",
                       "SLOTS", "BUSY", "IN FLIGHT",
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
        table = _table("Provisioned hosts", "HOST", "TEMPLATE", "STATE", "SLOTS", "BUSY",
                       "JOINED", "IDLE SINCE", right=("SLOTS", "BUSY", "JOINED", "IDLE SINCE"))
        for host in provisioned[:ROWS]:
            busy = sum(host.running.values())
            table.add_row(host.name, host.template or "", host.state, str(host.slots),
                          str(busy), _num(host.joined),
                          "-" if host.running else _num(host.idle_since))
        self.console.print(table)
        self._more(len(provisioned), "provisioned hosts")

    def info_queues(self, args: list[str]) -> None:
        del args
        state = self.sim.state
        pending: dict[str, int] = {}
        for job in [*state.pending.values(), *state.held.values()]:
            pending[job.spec.queue] = pending.get(job.spec.queue, 0) + 1
        running: dict[str, int] = {}
        slots: dict[str, int] = {}
        for run in state.running.values():
            running[run.spec.queue] = running.get(run.spec.queue, 0) + 1
            slots[run.spec.queue] = slots.get(run.spec.queue, 0) + run.spec.n
        table = _table(f"Queues at {show_time(self.now)}", "QUEUE", "PRIO", "PEND", "RUN",
                       "RUN SLOTS", "HOSTS", right=("PRIO", "PEND", "RUN", "RUN SLOTS"))
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
            self.say("no elastic supply: the cluster has no templates and no countables")
            return
        backoff = sim.memory.backoff_until
        if sim.templates:
            table = _table(f"Hosts at {show_time(self.now)}", "TEMPLATE", "PRESENT",
                           "IN FLIGHT", "MAX", "ALLOWANCE", "BACKED OFF UNTIL",
                           right=("PRESENT", "IN FLIGHT", "MAX", "ALLOWANCE"))
            for name, template in sorted(sim.templates.items()):
                until = backoff.get(name)
                table.add_row(
                    name, str(state.template_alive(name)), str(sim.in_flight.get(name, 0)),
                    str(template.max), str(state.allowance.get(name, "-")),
                    _num(until) if until is not None and until > self.now else "-",
                )
            self.console.print(table)
        if sim.pools:
            table = _table("Tokens", "POOL", "IN FLIGHT", "BORROWED", "USED",
                           right=("IN FLIGHT", "BORROWED", "USED"))
            for key in sorted(sim.pools):
                pool = state.pool_by_key(key)
                table.add_row(key, _num(sim.tokens_in_flight.get(key, 0.0)),
                              _num(sim.borrowed.get(key, 0.0)), _num(pool.used))
            self.console.print(table)
        actions = sim.actions_log[-RECENT_ACTIONS:]
        if not actions:
            self.say("no policy actions yet")
            return
        table = _table(f"Policy actions: last {len(actions)} of {len(sim.actions_log)}",
                       "TIME", "ACTION", "REASON", right=("TIME",))
        for when, action in actions:
            table.add_row(_num(when), escape(describe_action(action)), escape(action.reason))
        self.console.print(table)

    # -------------------------------------------------------------- why
    def cmd_why(self, args: list[str]) -> None:
        if len(args) != 1:
            raise ReplError("usage: why JOB")
        try:
            job = int(args[0])
        except ValueError:
            raise ReplError(f"bad job id '{args[0]}'") from None
        state, metrics = self.sim.state, self.sim.metrics
        spec = self.jobs.get(job)
        if spec is None:
            raise ReplError(f"job {job} is not in the workload")
        if job in metrics.too_large:
            self.say(f"Job {job}: never submitted: {spec.procs} slots is more than the "
                     "cluster could ever have")
        elif job not in metrics.submitted:
            self.say(f"Job {job}: not submitted yet; it submits at {show_time(spec.submit)}")
        elif job in state.running:
            run = state.running[job]
            hosts = " ".join(
                f"{n}*{h.name}" for i, n in run.hosts.items() if (h := state.hosts[i]) is not None
            )
            self.say(f"Job {job}: running since {show_time(run.start)} on {hosts}")
        elif job in state.pending or job in state.held:
            result = self.sim.last_result
            if result is None or result.reason_of(job) is None:
                self.say(f"Job {job}: pending, submitted at {show_time(spec.submit)}; "
                         "no session has considered it yet")
            else:
                self.say(f"Job {job}: {result.reason_of(job)}")
                found = result.reservation_of(job)
                if found is not None:
                    hosts = " ".join(f"{n}*{h}" for h, n in found.hosts.items())
                    self.say(f"  expected start: {_expected(found)} on {hosts}")
                for entry in result.trace_of(job):
                    self.say(f"  [{entry.stage}] {entry.check}: {entry.detail} "
                             f"(evaluated job {entry.job})")
        else:
            self.say(f"Job {job}: finished")

    # -------------------------------------------------------------- set policy
    def cmd_set(self, args: list[str]) -> None:
        if not args or args[0].lower() != "policy" or len(args) not in (1, 3):
            raise ReplError("usage: set policy [KEY VALUE]")
        policy = self.sim.policy
        if len(args) == 1:
            table = _table("Policy", "KEY", "VALUE", right=("VALUE",))
            for key in POLICY_KEYS:
                table.add_row(key, _num(getattr(policy, key)))
            self.console.print(table)
            return
        key, text = args[1].lower(), args[2]
        if key not in POLICY_KEYS:
            raise ReplError(f"unknown policy key '{args[1]}' (one of: {', '.join(POLICY_KEYS)})")
        value: float
        if key == "max_requests_per_round":
            try:
                value = int(text)
            except ValueError:
                raise ReplError(f"{key} must be a whole number, got '{text}'") from None
            if value < 1:
                raise ReplError(f"{key} must be >= 1")
        else:
            value = parse_time(text)
            if key.startswith("backoff") and value <= 0:
                raise ReplError(f"{key} must be > 0")
        changed: PolicyConfig = msgspec.structs.replace(policy, **{key: value})
        if changed.backoff_max < changed.backoff_initial:
            raise ReplError(
                f"backoff_max ({_num(changed.backoff_max)}) must be >= backoff_initial "
                f"({_num(changed.backoff_initial)})"
            )
        self.sim.policy = changed
        self.say(f"policy {key}: {_num(getattr(policy, key))} -> {_num(value)} "
                 "(from the next policy round)")

    # -------------------------------------------------------------- record, report
    def cmd_record(self, args: list[str]) -> None:
        if len(args) != 1:
            raise ReplError("usage: record FILE | record stop")
        if args[0].lower() == "stop":
            if self.recorder is None:
                raise ReplError("not recording")
            self.close()
            return
        if self.recorder is not None or self.sim.recorder is not None:
            raise ReplError(f"already recording to {self.recording} (record stop first)")
        path = Path(args[0])
        events = state_events(self.sim.state)
        recorder = Recorder(path)
        now = self.sim.now
        for event in events:
            recorder.event(now, event)
        self.sim.recorder = recorder
        self.recorder, self.recording = recorder, path
        self.say(
            f"recording to {path} from {show_time(self.now)}. A recording started mid-run replays "
            "only if it starts with the configuration, so it begins with it and "
            f"{len(events) - 1} events that rebuild the current state (check with: "
            f"xce sim replay {path})"
        )

    def cmd_report(self, args: list[str]) -> None:
        if len(args) != 1:
            raise ReplError("usage: report DIR")
        directory = Path(args[0])
        if directory.exists() and not directory.is_dir():
            raise ReplError(f"{directory} exists and is not a directory")
        write_report(directory, self.sim, self._summary())
        self.say(f"report written to {directory / 'index.html'}")

    def cmd_summary(self, args: list[str]) -> None:
        if args:
            raise ReplError("usage: summary")
        table = _table(f"Summary at {show_time(self.now)}", "METRIC", "VALUE", right=("VALUE",))
        for key, value in self._summary().items():
            table.add_row(key, escape(format_value(value)))
        self.console.print(table)

    def cmd_help(self, args: list[str]) -> None:
        del args
        table = _table("Commands", "COMMAND", "WHAT IT DOES")
        for command, what in HELP:
            table.add_row(escape(command), what)
        self.console.print(table)
        self.say(TIMES)


def _expected(found: Reservation) -> str:
    """A reservation's start: `1800 (30m)`; `virtual` when it holds supply being
    obtained."""
    shown = show_time(found.start).removeprefix("t=")
    return f"{shown} virtual" if found.virtual else shown


def describe_action(action: Action) -> str:
    """A policy action in a few words: `request 3 cloud`, `drain cloud-4`."""
    match action:
        case RequestHosts(template=template, count=count):
            return f"request {count} {template}"
        case RequestTokens(resource=resource, amount=amount):
            return f"borrow {_num(amount)} {resource}"
        case DrainHost(host=host):
            return f"drain {host}"
        case DecommissionHost(host=host):
            return f"decommission {host}"
        case ReturnTokens(resource=resource, amount=amount):
            return f"return {_num(amount)} {resource}"
        case SetAllowance(template=template, allowance=allowance):
            if allowance is None:
                return f"lift allowance {template}"
            return f"allowance {template}={allowance}"
    return type(action).__name__


# ---------------------------------------------------------------------- input


def _terminal_lines(repl: Repl) -> Iterator[str]:
    from prompt_toolkit import PromptSession
    from prompt_toolkit.completion import WordCompleter
    from prompt_toolkit.history import FileHistory

    session: PromptSession[str] = PromptSession(
        history=FileHistory(os.path.expanduser(HISTORY_FILE)),
        completer=WordCompleter(WORDS),
    )
    while True:
        try:
            yield session.prompt(repl.prompt())
        except KeyboardInterrupt:
            continue
        except EOFError:
            return


def run_repl(simulator: Simulator, stdin: IO[str] | None = None,
             console: Console | None = None, errors: Console | None = None) -> int:
    """Read and run commands until quit or end of input; the exit status (1 if a
    command failed in script mode)."""
    stream = sys.stdin if stdin is None else stdin
    console = console or Console(highlight=False)
    errors = errors or Console(stderr=True, highlight=False)
    interactive = stream.isatty()
    repl = Repl(simulator, console, errors, interactive)
    if interactive:
        console.print(
            f"XCE simulator: {len(simulator.workload.jobs)} jobs of {simulator.workload.name} "
            f"on {simulator.config.cluster}. Type help for the commands.",
            soft_wrap=True, markup=False,
        )
    lines: Iterable[str] = _terminal_lines(repl) if interactive else stream
    try:
        for line in lines:
            if not repl.execute(line):
                break
    finally:
        repl.close()
    return 1 if repl.failed and not interactive else 0
