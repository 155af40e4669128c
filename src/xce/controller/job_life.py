"""What `GET /jobs/{id}/history` and `GET /acct` answer (LSF's bhist and bacct), read
off the event loop from the durable log; the routes are in app.py.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Mapping

from xce.controller import accounting
from xce.controller.auth import Identity
from xce.controller.core import Controller
from xce.controller.job_history import job_history
from xce.controller.problems import ApiProblem
from xce.model.api import AcctSummary, JobHistory

# Facts looked at from this long before a job's submission (the time of a fact is the
# controller's clock when it was made: a little slack for a clock that stepped back).
CLOCK_SLACK = 1.0


async def history(ctl: Controller, job_id: int) -> JobHistory:
    """The life of a job the controller still keeps, or of one whose accounting record
    it has: read from the log from its submission on."""
    job = ctl.view.jobs.get(job_id)
    loop = asyncio.get_running_loop()
    if job is not None:
        submit = job.spec.submit
    else:
        record = await loop.run_in_executor(None, ctl.store.job_accounting, job_id)
        if record is None:
            raise ApiProblem(404, f"Job <{job_id}>: No matching job found")
        submit = record.submit
    now = ctl.clock()

    def read() -> JobHistory | None:
        return job_history(ctl.store.read_from_time(submit - CLOCK_SLACK), job_id, now)

    found = await loop.run_in_executor(None, read)
    if found is None:
        raise ApiProblem(404, f"Job <{job_id}>: no fact of its submission in the log")
    return found


def _time(query: Mapping[str, str], key: str) -> float | None:
    if key not in query:
        return None
    try:
        value = float(query[key])
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or not 0 <= value <= 1e11:
        raise ApiProblem(400, f"{key} must be a time in seconds since the epoch, "
                              f"got {query[key]!r}")
    return value


async def acct(ctl: Controller, who: Identity, query: Mapping[str, str]) -> AcctSummary:
    """`?user=NAME|all&queue=Q&since=T&until=T`: the accounting of the jobs that ended
    in [since, until) (seconds since the epoch; default: all), per user and queue.
    Default user: yourself for a user, all for the other roles."""
    user = query.get("user", who.name if who.role == "user" else "all")
    queue = query.get("queue") or None
    since, until = _time(query, "since"), _time(query, "until")
    if since is not None and until is not None and until < since:
        raise ApiProblem(400, "until must not be before since")
    wanted = None if user == "all" else user
    records = await asyncio.get_running_loop().run_in_executor(
        None, ctl.store.accounting, since, until, wanted)
    return accounting.summary(records, since, until, queue)
