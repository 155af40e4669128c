"""Job arrays in the live controller: a submission of `-J "name[1-1000]%10"` expands
into its elements (one fact batch), and `xce kill ARRAY` kills every element.

An array takes the next job id for itself (no job has it) and its element of index I
the id ARRAY + I (shown `ARRAY[I]`), so the next job's id follows its highest index.
"""

from __future__ import annotations

import msgspec

from xce.controller.auth import Identity
from xce.controller.kernel import FactKernel
from xce.controller.problems import ApiProblem
from xce.controller.view import FINISHED, JobRecord
from xce.model.events import JobKilled, JobSubmitted
from xce.model.jobs import JobSpec
from xce.resreq.arrays import ArrayError, parse_array
from xce.sched.errors import SubmitError


def elements_of(spec: JobSpec, max_size: int) -> list[JobSpec]:
    """The elements of the array `spec.name` asks for (`spec.id`: the array's id),
    each checked as its own job would be by the caller. ApiProblem 400 when the
    array spec is wrong (naming the column)."""
    try:
        asked = parse_array(spec.name, max_size)
    except ArrayError as err:
        raise ApiProblem(400, str(err)) from err
    base = msgspec.structs.replace(spec, name=asked.name, array=spec.id,
                                   array_limit=asked.limit)
    return [msgspec.structs.replace(base, id=spec.id + index, index=index)
            for index in asked.indices]


async def submit_array(facts: FactKernel, spec: JobSpec) -> tuple[int, str]:
    """Submit the job array `spec` asks for: every element, or none (one commit)."""
    state = facts.state
    elements = elements_of(spec, state.config.max_job_array_size)
    try:
        elements = [state.resolve(element) for element in elements]
    except SubmitError as err:
        raise ApiProblem(400, str(err)) from err
    first = elements[0]
    too_large = state.refusal(first)
    if too_large is not None:
        raise ApiProblem(400, too_large)
    facts.view.last_job_id = max(e.id for e in elements)  # reserved even if it fails
    await facts.commit(first.submit, [JobSubmitted(element) for element in elements])
    return spec.id, first.queue


async def kill_array(facts: FactKernel, who: Identity, array: int) -> JobRecord:
    """Kill every unfinished element of `array` (one commit); the first one killed."""
    view = facts.view
    elements = [view.jobs[job] for job in view.arrays[array]]
    if who.role != "admin" and elements[0].spec.user != who.name:
        raise ApiProblem(403, f"Job <{array}>: not the owner of the job")
    alive = [job for job in elements if job.state not in FINISHED]
    if not alive:
        raise ApiProblem(409, f"Job <{array}>: Job has already finished")
    now = facts.clock()
    await facts.commit(now, [JobKilled(job.spec.id, now) for job in alive])
    return alive[0]
