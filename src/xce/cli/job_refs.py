"""Jobs as the commands name and show them: a job `1045`, a job array `1045` (every
element) or one of its elements `"1045[3]"` (LSF's JOBID[INDEX]), and `xce jobs -A`
(bjobs -A), one line per array with its elements counted by state.

An element of array A with index I has its own job id, A + I: `1045[3]` is job 1048,
and `xce jobs` shows it as `1045[3]`.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import click

from xce.cli.client import Client, ClientError
from xce.model.api import JobInfo
from xce.model.job_ids import id_ranges

JobRef = tuple[int, int | None]  # a job or array id, and an element's index (None: all)
_REF_RE = re.compile(r"(\d{1,18})(?:\[(\d{1,10})\])?")


class JobRefType(click.ParamType[JobRef]):
    """`ID` or `ID[INDEX]` on the command line."""

    name = "JOBID"

    def convert(self, value: Any, param: click.Parameter | None,
                ctx: click.Context | None) -> JobRef:
        if isinstance(value, tuple):
            return value  # (already converted)
        found = _REF_RE.fullmatch(str(value).strip())
        if found is None:
            self.fail(f"{value!r} is not a job id: expected ID or ID[INDEX] "
                      "(an element of a job array), e.g. 1045 or 1045[3]", param, ctx)
        index = found.group(2)
        if index is not None and int(index) < 1:
            self.fail(f"{value!r}: array indices start at 1", param, ctx)
        return int(found.group(1)), None if index is None else int(index)


JOB_REF = JobRefType()


def ref_text(ref: JobRef) -> str:
    job, index = ref
    return str(job) if index is None else f"{job}[{index}]"


def shown_id(job: JobInfo) -> str:
    """The JOBID column: `1045`, or `1045[3]` for an element of array 1045."""
    return f"{job.array}[{job.index}]" if job.index else str(job.id)


def shown_name(job: JobInfo) -> str:
    """The job's name: `-J` name (an element's `name[3]`), else its command line."""
    if job.index:
        return f"{job.name}[{job.index}]"
    return job.name


def lookup(client: Client, ref: JobRef) -> list[JobInfo]:
    """The job (or every element of the array, or the element) `ref` names;
    ClientError 404 naming `ref` when there is none."""
    job, index = ref
    if index is None:
        try:
            return [client.job(job)]
        except ClientError as err:
            if err.status != 404:
                raise
            elements = client.jobs(state="all", array=job).jobs
            if not elements:
                raise
            return elements
    return [_element(client, job, index)]


def target(client: Client, ref: JobRef) -> int:
    """The job id to act on: a job's or an array's own (the controller acts on every
    element of an array), or the element's, checked to be that element."""
    job, index = ref
    return job if index is None else _element(client, job, index).id


def _element(client: Client, array: int, index: int) -> JobInfo:
    missing = ClientError(f"Job <{array}[{index}]>: No matching job found", 404)
    try:
        found = client.job(array + index)
    except ClientError as err:
        if err.status == 404:
            raise missing from err
        raise
    if found.array != array or found.index != index:
        raise missing
    return found


ARRAY_COLUMNS = ("JOBID", "ARRAY_SPEC", "OWNER", "NJOBS", "PEND", "DONE", "RUN", "EXIT",
                 "SSUSP", "USUSP", "PSUSP")


def array_rows(jobs: Sequence[JobInfo]) -> list[list[str]]:
    """bjobs -A: per job array (in id order), its spec and its elements by state."""
    arrays: dict[int, list[JobInfo]] = {}
    for job in jobs:
        if job.index:
            arrays.setdefault(job.array, []).append(job)
    rows = []
    for array in sorted(arrays):
        elements = arrays[array]
        states = [job.state for job in elements]
        indices = id_ranges([job.index for job in elements]).replace(" ", ",")
        rows.append([
            str(array), f"{elements[0].name}[{indices}]", elements[0].user,
            str(len(elements)), str(states.count("PEND")), str(states.count("DONE")),
            str(states.count("RUN")), str(states.count("EXIT")), "0",
            str(states.count("USUSP")), str(states.count("PSUSP")),
        ])
    return rows
