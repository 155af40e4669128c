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

import os
import signal
import sys
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from types import FrameType
from typing import IO, Any

import msgspec
from rich.console import Console
from rich.markup import escape

from xce.model.policy import PolicyConfig
from xce.model.recording import Recorder
from xce.sim.driver import Simulator
from xce.sim.repl_info import InfoTables
from xce.sim.repl_text import (
    ReplError,
    expected_start,
    hosts_text,
    parse_time,
    plural,
    show_number,
    show_time,
    titled_table,
)
from xce.sim.report import write_report
from xce.sim.summary_text import format_value

HISTORY_FILE = "~/.xce_sim_history"

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


class _Interrupted(Exception):
    """Ctrl-C during `run`: raised between two simulator steps."""


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
            "run": self.cmd_run, "step": self.cmd_step, "info": InfoTables(self).cmd_info,
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
        pending = len(state.pending) + len(state.held) + len(state.waiting)
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
            f"{head} {show_time(self.now)}: {plural(sessions, 'session')}, "
            f"{plural(started, 'job')} started, {finished} finished; {self._counts()}{done}"
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
            f"ran {plural(ran, 'session')}{short}; session "
            f"{self.sim.metrics.sessions} at {show_time(result.now)}: "
            f"{len(result.dispatch)} dispatched, {self._counts()}"
        )

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
            hosts = hosts_text(
                (h.name, n) for i, n in run.hosts.items() if (h := state.hosts[i]) is not None
            )
            self.say(f"Job {job}: running since {show_time(run.start)} on {hosts}")
        elif job in state.pending or job in state.held or job in state.waiting:
            result = self.sim.last_result
            if result is None or result.reason_of(job) is None:
                self.say(f"Job {job}: pending, submitted at {show_time(spec.submit)}; "
                         "no session has considered it yet")
            else:
                self.say(f"Job {job}: {result.reason_of(job)}")
                found = result.reservation_of(job)
                if found is not None:
                    hosts = hosts_text(found.hosts.items())
                    self.say(f"  expected start: {expected_start(found)} on {hosts}")
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
            table = titled_table("Policy", "KEY", "VALUE", right=("VALUE",))
            for key in POLICY_KEYS:
                table.add_row(key, show_number(getattr(policy, key)))
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
                f"backoff_max ({show_number(changed.backoff_max)}) must be >= backoff_initial "
                f"({show_number(changed.backoff_initial)})"
            )
        self.sim.policy = changed
        self.say(f"policy {key}: {show_number(getattr(policy, key))} -> {show_number(value)} "
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
        events = self.sim.state_events()
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
        table = titled_table(f"Summary at {show_time(self.now)}", "METRIC", "VALUE",
                             right=("VALUE",))
        for key, value in self._summary().items():
            table.add_row(key, escape(format_value(value, key)))
        self.console.print(table)

    def cmd_help(self, args: list[str]) -> None:
        del args
        table = titled_table("Commands", "COMMAND", "WHAT IT DOES")
        for command, what in HELP:
            table.add_row(escape(command), what)
        self.console.print(table)
        self.say(TIMES)


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
