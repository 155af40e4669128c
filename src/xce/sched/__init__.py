"""The scheduler core: pure, deterministic, fed by events, clock passed in.

`SchedulerState` keeps incremental indices (hosts, free capacity, buckets of pending
jobs, limit usage); `run_session` reads them and returns a `SessionResult`.
"""

from xce.sched.session import run_session
from xce.sched.state import SchedulerState, SubmitError

__all__ = ["SchedulerState", "SubmitError", "run_session"]
