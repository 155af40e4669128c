"""Workloads for the simulator: SWF traces and YAML job lists (FORMATS.md, "Workloads").

`load_workload` picks the reader by file suffix:

* `.swf` / `.swf.gz` (gzip recognised by its magic bytes, whatever the name):
  Standard Workload Format records, one job a line. Unusable records (run time <= 0,
  processors <= 0, submit < 0, a repeated job number) and malformed lines are
  skipped and counted by reason; submit times become relative to the earliest job.
* `.yaml` / `.yml`: a `jobs:` list of `{id or ids, submit, run, n, user, queue,
  run_limit, res, gpus, name, array, depend, exit, end_orphan}` (a scenario file's
  other top-level keys are ignored).
  Problems raise WorkloadError naming file, line and field.

`transform` cuts a time window, keeps the first N jobs and scales the arrival rate.
"""

from __future__ import annotations

import gzip
import math
import os
import zlib
from operator import attrgetter
from pathlib import Path
from typing import Final

import msgspec

from xce.config import ConfigError, load_yaml
from xce.config.fields import MapReader, Place, as_id_range, as_list, as_text
from xce.resreq import ResReqError, parse
from xce.resreq.arrays import ArrayError, parse_indices
from xce.resreq.depend import MAX_INDEX

MALFORMED: Final = "malformed"
SUBMIT_NEGATIVE: Final = "submit < 0"
RUN_NOT_POSITIVE: Final = "run time <= 0"
PROCS_NOT_POSITIVE: Final = "processors <= 0"
DUPLICATE_ID: Final = "duplicate job number"

SWF_FIELDS: Final = 18
YAML_JOB_KEYS = (
    "id", "ids", "submit", "run", "n", "user", "queue", "mem_per_proc_mb", "run_limit",
    "requested_time", "res", "gpus", "name", "array", "depend", "exit", "end_orphan",
    "hosts", "exclusive", "priority",
)
UNKNOWN_USER: Final = "nobody"  # SWF user -1 (unknown); also the YAML default

_GZIP_MAGIC: Final = b"\x1f\x8b"
_KB_PER_MB: Final = 1024.0
_job_order = attrgetter("submit", "id")


class WorkloadJob(msgspec.Struct, frozen=True, gc=False):
    """One job of a workload: when it arrives, how long it runs, how many processors."""

    id: int
    submit: float  # seconds
    run: float  # seconds, > 0
    procs: int  # > 0
    user: str
    queue: str  # "" when unknown (the first configured queue)
    mem_per_proc_mb: float | None = None  # requested memory per processor
    # The job's run limit, seconds (JobSpec.run_limit): SWF field 9 (requested time)
    # when > 0, a YAML job's `run_limit`; None: the queue's, else none.
    run_limit: float | None = None
    res: str = ""  # requirement string (YAML workloads)
    gpus: int = 0  # GPUs on each host of the job (YAML workloads; bsub -gpu "num=N")
    # YAML workloads: the job's name; an element of a job array (`array` its id,
    # `index`, `array_limit` its %N; JobSpec's); its dependency condition (`depend`,
    # `end_orphan`: -ti); the exit code it ends with (nonzero: EXIT).
    name: str = ""
    array: int = 0
    index: int = 0
    array_limit: int = 0
    depend: str = ""
    exit_code: int = 0
    end_orphan: bool = False
    hosts: tuple[str, ...] = ()  # YAML workloads: bsub -m (names, groups, template:GLOB)
    priority: int = 0  # YAML workloads: the job's user priority (bsub -sp; 0: none)
    exclusive: bool = False  # YAML workloads: bsub -x


class Workload(msgspec.Struct):
    """The jobs of a trace or YAML file, sorted by (submit, id), and what was skipped."""

    name: str
    jobs: list[WorkloadJob]
    skipped: int = 0  # unusable records skipped
    skipped_reasons: dict[str, int] = {}  # reason -> count, e.g. {"run time <= 0": 12}
    max_procs: int | None = None  # SWF header MaxProcs, else MaxNodes
    max_nodes: int | None = None  # SWF header MaxNodes
    header: dict[str, str] = {}  # SWF "; Key: value" lines (repeats joined by newlines)


class WorkloadError(ValueError):
    """A workload that cannot be read: `str(err)` is `file:line: message`.

    `line` is 0 when no line applies (unreadable file, unknown format). Errors in YAML
    workloads also name the field: `file:line: field: message` (as ConfigError does).
    """

    def __init__(self, file: str, line: int, message: str, field: str = "") -> None:
        super().__init__(file, line, message, field)
        self.file = file
        self.line = line
        self.message = message
        self.field = field

    def __str__(self) -> str:
        field = f"{self.field}: " if self.field else ""
        return f"{self.file}:{self.line}: {field}{self.message}"


def load_workload(path: str | os.PathLike[str]) -> Workload:
    """Read a workload, choosing the format by suffix (.swf, .swf.gz, .yaml, .yml, or a
    recording: .jsonl, .jsonl.gz)."""
    lower = Path(path).name.lower()
    if lower.endswith((".swf", ".swf.gz")):
        return read_swf(path)
    if lower.endswith((".yaml", ".yml")):
        return read_yaml_jobs(path)
    if lower.endswith((".jsonl", ".jsonl.gz")):
        from xce.sim.recorded import read_recorded_jobs  # it builds on this module

        return read_recorded_jobs(path)
    raise WorkloadError(
        str(path), 0,
        "unknown workload format (expected .swf, .swf.gz, .yaml, .yml, .jsonl or .jsonl.gz)",
    )


# --- SWF -------------------------------------------------------------------------------


def read_swf(path: str | os.PathLike[str]) -> Workload:
    """Read a Standard Workload Format trace, plain or gzip-compressed."""
    filename = str(path)
    try:
        with open(path, "rb") as stream:
            data = stream.read()
    except OSError as err:
        raise WorkloadError(filename, 0, f"cannot read: {err}") from err
    if data[:2] == _GZIP_MAGIC:
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError, zlib.error) as err:
            raise WorkloadError(filename, 0, f"cannot decompress: {err}") from err
    return _parse_swf(data.decode("utf-8", errors="replace"), filename, _swf_name(path))


def _swf_name(path: str | os.PathLike[str]) -> str:
    name = Path(path).name
    for suffix in (".gz", ".swf"):
        if name.lower().endswith(suffix):
            name = name[: -len(suffix)]
    return name


def _parse_swf(text: str, filename: str, name: str) -> Workload:
    """Parse SWF text. The loop is the hot path: str.split and int/float only."""
    jobs: list[WorkloadJob] = []
    base: float | None = None  # the first job's submit; times are made relative to it
    reasons: dict[str, int] = {}
    header: dict[str, str] = {}
    header_key: str | None = None  # the key that indented comment lines continue
    seen: set[int] = set()
    users: dict[str, str] = {}
    queues: dict[str, str] = {}
    isfinite = math.isfinite
    for line in text.split("\n"):
        fields = line.split()
        if len(fields) != SWF_FIELDS or fields[0][0] == ";":
            if not fields:
                continue
            if fields[0][0] == ";":
                header_key = _header_line(line, header, header_key)
            else:
                reasons[MALFORMED] = reasons.get(MALFORMED, 0) + 1
            continue
        try:
            job_id = int(fields[0])
            submit = float(fields[1])
            run = float(fields[3])
            procs = int(fields[4])
            if procs <= 0:
                procs = int(fields[7])
            requested_time = float(fields[8])
            mem_kb = float(fields[9])
            try:
                user = users[fields[11]]
            except KeyError:
                user = users[fields[11]] = _swf_user(fields[11])
            try:
                queue = queues[fields[14]]
            except KeyError:
                queue = queues[fields[14]] = _swf_queue(fields[14])
        except ValueError:
            reasons[MALFORMED] = reasons.get(MALFORMED, 0) + 1
            continue
        # One test for nan and inf in any of the four (a sum of finite values is finite
        # unless it overflows, and such a record is garbage anyway).
        if not isfinite(submit + run + requested_time + mem_kb):
            reason = MALFORMED
        elif submit < 0:
            reason = SUBMIT_NEGATIVE
        elif run <= 0:
            reason = RUN_NOT_POSITIVE
        elif procs <= 0:
            reason = PROCS_NOT_POSITIVE
        elif job_id in seen:
            reason = DUPLICATE_ID
        else:
            seen.add(job_id)
            if base is None:
                base = submit
            jobs.append(WorkloadJob(
                job_id, submit - base, run, procs, user, queue,
                mem_kb / _KB_PER_MB if mem_kb > 0 else None,
                requested_time if requested_time > 0 else None,
            ))
            continue
        reasons[reason] = reasons.get(reason, 0) + 1
    if not jobs and not header and reasons.get(MALFORMED, 0) == sum(reasons.values()):
        raise WorkloadError(
            filename, _first_nonblank_line(text),
            "not an SWF file: no job record and no '; Key: value' header line",
        )
    return _swf_workload(name, jobs, reasons, header)


def _swf_workload(
    name: str, jobs: list[WorkloadJob], reasons: dict[str, int], header: dict[str, str]
) -> Workload:
    """The workload of the parsed SWF records: jobs sorted, the earliest at time 0;
    skipped records by reason; the sizes the header gives."""
    jobs.sort(key=_job_order)
    if jobs and jobs[0].submit != 0:  # a record earlier than the first one: shift again
        shift = jobs[0].submit
        jobs = [msgspec.structs.replace(job, submit=job.submit - shift) for job in jobs]
    max_nodes = _leading_int(header.get("MaxNodes"))
    max_procs = _leading_int(header.get("MaxProcs"))
    return Workload(
        name=name,
        jobs=jobs,
        skipped=sum(reasons.values()),
        skipped_reasons=reasons,
        max_procs=max_procs if max_procs is not None else max_nodes,
        max_nodes=max_nodes,
        header=header,
    )


def _first_nonblank_line(text: str) -> int:
    for number, line in enumerate(text.split("\n"), 1):
        if line.strip():
            return number
    return 1


def _swf_user(text: str) -> str:
    user = int(text)  # ValueError: a malformed record
    return UNKNOWN_USER if user < 0 else f"u{user}"


def _swf_queue(text: str) -> str:
    queue = int(text)  # ValueError: a malformed record
    return "" if queue < 0 else f"q{queue}"


def _header_line(line: str, header: dict[str, str], key: str | None) -> str | None:
    """Record one comment line; returns the key that a following indented line continues.

    `; Key: value` (at most one space after ';', Key a single word) starts an entry;
    an indented line without such a key continues the previous entry; a bare `;`
    ends it. A repeated key (Queue, Note) gets its values joined by newlines.
    """
    content = line.lstrip()[1:]
    text = content.strip()
    if not text:
        return None
    indent = len(content) - len(content.lstrip())
    head, colon, value = text.partition(":")
    if colon and indent <= 1 and head and head.replace("_", "").replace("-", "").isalnum():
        value = value.strip()
        header[head] = f"{header[head]}\n{value}" if head in header else value
        return head
    if key is not None and indent > 1:
        header[key] = f"{header[key]}\n{text}" if header[key] else text
        return key
    return None


def _leading_int(value: str | None) -> int | None:
    """The positive integer a header value starts with ("338 (batch partition)" -> 338)."""
    if value is None:
        return None
    text = value.strip()
    end = 0
    while end < len(text) and text[end].isdigit():
        end += 1
    number = int(text[:end]) if end else 0
    return number if number > 0 else None


# --- YAML ------------------------------------------------------------------------------


def read_yaml_jobs(path: str | os.PathLike[str]) -> Workload:
    """Read a YAML workload: a `jobs:` list and an optional `name` (other top-level
    keys, such as a scenario's `cluster` or `now`, are ignored).

    Each job: `id` (or `ids: "3-10"` for alike jobs), `run` (seconds, required, > 0),
    `submit` (seconds, default 0), `n` (processors, default 1), `user` (default
    "nobody"), `queue` (default "": the first queue), and optionally
    `mem_per_proc_mb`, `run_limit` (seconds, >= 0; `requested_time` is the older
    spelling, as SWF names it), `res` (a requirement string), `gpus` (GPUs on
    each host of the job, >= 0), `name`, `array` (`"1-100%5"`: `id` is the array's
    id, its elements are id + index; docs/simulator.md), `depend` (a `-w`
    condition, checked when the job arrives), `end_orphan` (-ti) and `exit` (the exit
    code the job ends with, default 0), `priority` (its user priority, bsub -sp, as a
    scenario's: 0, none, by default). Submit times are kept as written.
    """
    filename = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as err:
        raise WorkloadError(filename, 0, f"cannot read: {err}") from err
    try:
        return _yaml_workload(text, filename, Path(path).stem)
    except ConfigError as err:
        raise WorkloadError(err.file, err.line, err.message, err.field) from err


def _yaml_workload(text: str, filename: str, default_name: str) -> Workload:
    root = MapReader(load_yaml(text, filename), Place(filename, 1, ""))
    name = root.text("name", default_name)
    jobs: list[WorkloadJob] = []
    seen: set[int] = set()
    for item, place in as_list(*root.required("jobs")):
        job = MapReader(item, place, YAML_JOB_KEYS)
        if ("id" in job) == ("ids" in job):
            job.place.fail("give exactly one of id or ids")
        if "id" in job:
            ids, id_place = [job.integer("id", minimum=0)], job.value_place("id")
        else:
            id_place = job.value_place("ids")
            ids = as_id_range(job.text("ids"), id_place)
        run = job.number("run", positive=True)
        submit = job.number("submit", 0.0, minimum=0)
        procs = job.integer("n", 1, minimum=1)
        user = job.text("user", UNKNOWN_USER)
        queue = job.text("queue", "")
        mem = job.optional_number("mem_per_proc_mb", minimum=0)
        limit = _yaml_run_limit(job)
        res = _yaml_requirement(job)
        gpus = job.integer("gpus", 0, minimum=0)
        extras, elements = _yaml_extras(job)
        for job_id in elements or ids:
            if job_id in seen:
                id_place.fail(f"duplicate job id {job_id}")
            seen.add(job_id)
            jobs.append(
                WorkloadJob(job_id, submit, run, procs, user, queue, mem, limit, res, gpus)
                if extras is None
                else msgspec.structs.replace(
                    extras, id=job_id, submit=submit, run=run, procs=procs, user=user,
                    queue=queue, mem_per_proc_mb=mem, run_limit=limit, res=res, gpus=gpus,
                    index=job_id - extras.array if extras.array else 0,
                )
            )
    jobs.sort(key=_job_order)
    return Workload(name=name, jobs=jobs)


def _yaml_extras(job: MapReader) -> tuple[WorkloadJob | None, list[int] | None]:
    """A YAML job's name, array, dependency and exit code, as the fields of a
    WorkloadJob (the others are placeholders; None when it has none), and for an
    `array` entry its elements' ids (its `id` plus each index)."""
    if not any(
        key in job for key in ("name", "array", "depend", "exit", "end_orphan", "hosts",
                               "exclusive", "priority")
    ):
        return None, None
    array = limit = 0
    elements: list[int] | None = None
    if "array" in job:
        if "ids" in job:
            job.key_place("array").fail("an array entry gives the array's id (id), not ids")
        array = job.integer("id", minimum=0)
        try:
            spec = parse_indices(job.text("array"), MAX_INDEX)
        except ArrayError as err:
            job.value_place("array").fail(str(err))
        limit = spec.limit
        elements = [array + index for index in spec.indices]
    return WorkloadJob(
        0, 0.0, 1.0, 1, "", "", name=job.text("name", "", nonempty=False), array=array,
        array_limit=limit, depend=job.text("depend", "", nonempty=False),
        exit_code=job.integer("exit", 0), end_orphan=job.flag("end_orphan", False),
        hosts=_yaml_hosts(job), exclusive=job.flag("exclusive", False),
        priority=job.integer("priority", 0),
    ), elements


def _yaml_hosts(job: MapReader) -> tuple[str, ...]:
    """A YAML job's `hosts:` list (bsub -m), checked against the cluster when it arrives."""
    if "hosts" not in job:
        return ()
    items = as_list(job.get("hosts"), job.value_place("hosts"))
    if not items:
        job.value_place("hosts").fail("must not be empty (omit hosts for any host)")
    return tuple(as_text(item, item_place) for item, item_place in items)


def _yaml_run_limit(job: MapReader) -> float | None:
    """A YAML job's `run_limit` (or `requested_time`, not both), seconds >= 0."""
    if "run_limit" in job and "requested_time" in job:
        job.key_place("requested_time").fail("give one of run_limit or requested_time")
    key = "requested_time" if "requested_time" in job else "run_limit"
    return job.optional_number(key, minimum=0)


def _yaml_requirement(job: MapReader) -> str:
    """A YAML job's `res`, a requirement string that must parse: `file:line: jobs[3]:
    requirement error at column 12: ...` (the job's place, the line of its `res`)."""
    res = job.text("res", "", nonempty=False)
    try:
        parse(res)
    except ResReqError as err:
        at = job.value_place("res")
        Place(at.filename, at.line, job.place.field).fail(str(err))
    return res


# --- transform -------------------------------------------------------------------------


def transform(
    workload: Workload,
    *,
    start: float | None = None,
    end: float | None = None,
    first: int | None = None,
    load: float = 1.0,
) -> Workload:
    """A new workload: the jobs submitted in [start, end), then the first `first` of
    them, then arrivals `load` times as dense (submit times relative to the first
    kept job divided by `load`; 2.0 = twice the arrival rate). Submit times are not
    shifted otherwise; skipped counts and header facts are carried over.
    """
    if not (math.isfinite(load) and load > 0):
        raise ValueError(f"load must be a finite number > 0, got {load!r}")
    if first is not None and first < 0:
        raise ValueError(f"first must be >= 0, got {first}")
    jobs = [
        job for job in workload.jobs
        if (start is None or job.submit >= start) and (end is None or job.submit < end)
    ]
    if first is not None:
        jobs = jobs[:first]
    if load != 1.0 and jobs:
        base = jobs[0].submit
        jobs = [
            msgspec.structs.replace(job, submit=base + (job.submit - base) / load)
            for job in jobs
        ]
    return Workload(
        name=workload.name,
        jobs=jobs,
        skipped=workload.skipped,
        skipped_reasons=dict(workload.skipped_reasons),
        max_procs=workload.max_procs,
        max_nodes=workload.max_nodes,
        header=dict(workload.header),
    )
