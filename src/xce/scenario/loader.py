"""Read a scenario file into the events that build the scheduler state it describes.

Every problem is a ConfigError naming the scenario file, line and field, including
jobs the scheduler would refuse (unknown queue, bad requirement string).
"""

from __future__ import annotations

import os
from pathlib import Path

import msgspec

from xce.config import ConfigError, build_config, load_config, load_yaml
from xce.config.fields import (
    MapReader,
    Place,
    as_id_range,
    as_int,
    as_list,
    as_number,
    as_text,
)
from xce.model.cluster import ClusterConfig
from xce.model.events import (
    ConfigLoaded,
    HostAdded,
    HostStateChanged,
    JobFinished,
    JobHeld,
    JobStarted,
    JobSubmitted,
    SchedulerEvent,
    SupplyChanged,
)
from xce.model.jobs import JobSpec
from xce.resreq import GpuError, GpuRequest, parse_gpu
from xce.resreq.arrays import ArrayError, parse_indices
from xce.resreq.depend import MAX_INDEX
from xce.sched.state import SchedulerInputError, SchedulerState, SubmitError

JOB_KEYS = (
    "id", "ids", "user", "queue", "n", "res", "submit", "priority", "name", "state",
    "hosts", "start", "run", "run_limit", "hold", "gpus", "gpu", "array", "depend",
    "end_orphan", "exit", "end", "exclusive",
)
STATES = ("PEND", "RUN", "DONE", "EXIT")
HOST_KEYS = ("name", "state", "template", "joined", "idle_since", "requested_for")


class Scenario(msgspec.Struct):
    """A scheduler state at a moment: the events that build it, and `now`."""

    now: float
    config: ClusterConfig
    events: list[SchedulerEvent]

    def state(self) -> SchedulerState:
        """A fresh scheduler state with every event applied."""
        state = SchedulerState()
        state.apply_all(self.events)
        return state


def load_scenario(path: str | os.PathLike[str]) -> Scenario:
    """Load a scenario file (see FORMATS.md)."""
    filename = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as err:
        raise ConfigError(filename, 0, "", f"cannot read: {err}") from err
    return load_scenario_text(text, filename, Path(path).parent)


def load_scenario_text(text: str, filename: str, base_dir: Path | None = None) -> Scenario:
    """Load a scenario from text; `cluster_file` is relative to `base_dir`."""
    doc = load_yaml(text, filename)
    root = MapReader(
        doc, Place(filename, 1, ""), ("now", "cluster", "cluster_file", "jobs", "hosts", "supply")
    )
    now = root.number("now", 0.0)
    config = _cluster(root, filename, base_dir or Path("."))
    state = SchedulerState(config)
    events: list[SchedulerEvent] = [ConfigLoaded(config=config)]
    hosts = root.section("hosts")
    if hosts is not None:
        for item, place in as_list(*hosts):
            events.append(_apply(state, _host_event(item, place, config), place))
    jobs = root.section("jobs")
    started: list[tuple[SchedulerEvent, Place]] = []
    if jobs is not None:
        for item, place in as_list(*jobs):
            for event, later in _job_events(item, place):
                if later:
                    started.append((event, place))
                else:
                    events.append(_apply(state, event, place))
    supply = root.section("supply")
    if supply is not None:
        events.append(_apply(state, _supply_event(*supply), supply[1]))
    for event, place in sorted(started, key=lambda item: _start_time(item[0])):
        events.append(_apply(state, event, place))
    return Scenario(now=now, config=config, events=events)


def _array_elements(job: MapReader, ids: list[int], state: str) -> tuple[list[int], int]:
    """An `array: "1-100%5"` entry's indices and limit (`id` is the array's id, its
    elements' ids are id + index); ([], 0) for an entry of no array."""
    if "array" not in job:
        return [], 0
    if "ids" in job:
        job.key_place("array").fail("an array entry gives the array's id (id), not ids")
    if state != "PEND":
        job.value_place("state").fail("an array entry is PEND: its elements wait to run")
    try:
        spec = parse_indices(job.text("array"), MAX_INDEX)
    except ArrayError as err:
        job.value_place("array").fail(str(err))
    return list(spec.indices), spec.limit


def _ended(job: MapReader, job_id: int, state: str) -> JobFinished:
    """How a DONE or EXIT entry ended: at `end` (default: its submit time) with exit
    code `exit` (DONE: 0; EXIT: default 1)."""
    code = job.integer("exit", 0 if state == "DONE" else 1)
    if (code == 0) != (state == "DONE"):
        job.value_place("exit" if "exit" in job else "state").fail(
            "a DONE job exits 0; an EXIT job has a nonzero exit code"
        )
    return JobFinished(job=job_id, time=job.number("end", job.number("submit", 0.0)),
                       exit_code=code)


def _start_time(event: SchedulerEvent) -> float:
    return event.time if isinstance(event, JobStarted) else 0.0


SUPPLY_KEYS = (
    "in_flight", "tokens_in_flight", "borrowed", "headroom", "allowance", "requested", "lead_time"
)


def _supply_event(value: object, place: Place) -> SupplyChanged:
    supply = MapReader(value, place, SUPPLY_KEYS)
    counts: dict[str, dict[str, float]] = {}
    for section in ("in_flight", "tokens_in_flight", "borrowed", "headroom", "allowance",
                    "lead_time"):
        found = supply.section(section)
        if found is None:
            continue
        entries = MapReader(*found)
        whole = section in ("in_flight", "allowance")
        counts[section] = {
            str(key): (
                as_int(item, item_place, section, minimum=0)
                if whole
                else as_number(item, item_place, section, minimum=0)
            )
            for key, item, item_place in entries.items()
        }
    requested: dict[str, list[float]] = {}
    found = supply.section("requested")
    if found is not None:  # template -> when each in-flight host was requested
        for key, item, item_place in MapReader(*found).items():
            requested[str(key)] = [
                as_number(time, time_place, "requested")
                for time, time_place in as_list(item, item_place)
            ]
    return SupplyChanged(
        in_flight={k: int(v) for k, v in counts.get("in_flight", {}).items()},
        tokens_in_flight=counts.get("tokens_in_flight", {}),
        borrowed=counts.get("borrowed", {}),
        headroom=counts.get("headroom", {}),
        allowance={k: int(v) for k, v in counts.get("allowance", {}).items()},
        requested=requested,
        lead_time=counts.get("lead_time", {}),
    )


def _apply(state: SchedulerState, event: SchedulerEvent, place: Place) -> SchedulerEvent:
    """Apply to a scratch state so that refusals are reported at the right line (a
    submission checked as the controller checks it: its dependency condition too)."""
    try:
        if isinstance(event, JobSubmitted):
            state.resolve(event.job)
        state.apply(event)
    except (SubmitError, SchedulerInputError) as err:
        place.fail(str(err))
    return event


def _cluster(root: MapReader, filename: str, base_dir: Path) -> ClusterConfig:
    inline = root.section("cluster")
    if inline is not None:
        if "cluster_file" in root:
            root.key_place("cluster_file").fail("give either cluster or cluster_file")
        return build_config(inline[0], filename, field_prefix="cluster")
    if "cluster_file" in root:
        return load_config(base_dir / root.text("cluster_file"))
    return root.place.fail("a scenario needs cluster or cluster_file")


def _host_event(item: object, place: Place, config: ClusterConfig) -> SchedulerEvent:
    host = MapReader(item, place, HOST_KEYS)
    name = host.text("name")
    state = host.text("state", "ok")
    static = {h.name for h in config.hosts}
    if name in static:
        if "template" in host:
            host.key_place("template").fail(f"'{name}' is a static host")
        return HostStateChanged(name=name, state=state)
    if "template" not in host:
        host.key_place("name").fail(f"unknown host '{name}' (give its template)")
    template_name = host.text("template")
    templates = {t.name: t for t in config.catalog.templates}
    template = templates.get(template_name)
    if template is None:
        host.value_place("template").fail(f"unknown template '{template_name}'")
    joined = host.number("joined", 0.0)
    return HostAdded(
        name=name, slots=template.slots, type=template.type, model=template.model,
        resources=dict(template.resources), template=template.name, state=state,
        time=joined, idle_since=host.optional_number("idle_since"),
        requested_for=_requested_for(host),
    )


def _requested_for(host: MapReader) -> tuple[int, ...]:
    """A provisioned host's `requested_for:` (the job ids its request was for)."""
    if "requested_for" not in host:
        return ()
    items = as_list(host.get("requested_for"), host.value_place("requested_for"))
    return tuple(as_int(item, place, "a job id", minimum=0) for item, place in items)


def _m_hosts(job: MapReader) -> tuple[str, ...]:
    """A pending job's `hosts:` list (`bsub -m`: host names, host groups,
    `template:GLOB`); a mapping of hosts to slots is only for RUN jobs."""
    if "hosts" not in job:
        return ()
    if not isinstance(job.get("hosts"), list):
        job.key_place("hosts").fail(
            "hosts is a list of host names or groups (bsub -m); a mapping is only for RUN jobs"
        )
    items = as_list(job.get("hosts"), job.value_place("hosts"))
    if not items:
        job.value_place("hosts").fail("must not be empty (omit hosts for any host)")
    return tuple(as_text(item, item_place) for item, item_place in items)


def _gpu_request(job: MapReader) -> GpuRequest | None:
    """A job's GPUs: `gpus: N` (per host, shared) or LSF's `gpu: "num=N:mode=..."`
    (bsub -gpu), not both; None: no GPUs."""
    if "gpus" in job and "gpu" in job:
        job.key_place("gpu").fail("give one of gpus or gpu")
    if "gpu" in job:
        try:
            return parse_gpu(job.text("gpu"))
        except GpuError as err:
            job.value_place("gpu").fail(str(err))
    gpus = job.integer("gpus", 0, minimum=0)
    return GpuRequest(num=gpus) if gpus else None


def _job_events(item: object, place: Place) -> list[tuple[SchedulerEvent, bool]]:
    """The events of one `jobs:` entry; True marks events applied after all submissions."""
    job = MapReader(item, place, JOB_KEYS)
    if ("id" in job) == ("ids" in job):
        job.place.fail("give exactly one of id or ids")
    if "id" in job:
        ids = [job.integer("id", minimum=0)]
    else:
        ids = as_id_range(job.text("ids"), job.value_place("ids"))
    state = job.text("state", "PEND")
    if state not in STATES:
        job.value_place("state").fail(f"state must be {', '.join(STATES)}, got '{state}'")
    elements = _array_elements(job, ids, state)
    hosts: dict[str, int] = {}
    if state == "RUN":
        hosts_map = MapReader(job.required("hosts")[0], job.value_place("hosts"))
        for name, slots, slot_place in hosts_map.items():
            hosts[str(name)] = as_int(slots, slot_place, "slots", minimum=1)
        if len(ids) != 1:
            job.value_place("ids").fail("a RUN entry names one job")
    m_hosts = _m_hosts(job) if state != "RUN" else ()
    n = job.integer("n", 1, minimum=1)
    run = job.optional_number("run", minimum=0)
    run_limit = job.optional_number("run_limit", minimum=0)  # s; a RUN job ends by start + it
    gpu = _gpu_request(job)
    events: list[tuple[SchedulerEvent, bool]] = []
    array, limit = (ids[0], elements[1]) if elements[0] else (0, 0)
    depend = job.text("depend", "", nonempty=False)
    for job_id, index in zip(elements[0] or ids, elements[0] or [0] * len(ids), strict=True):
        spec = JobSpec(
            id=array + index if array else job_id, user=job.text("user", "nobody"),
            queue=job.text("queue", ""), n=n,
            res=job.text("res", "", nonempty=False), submit=job.number("submit", 0.0),
            priority=job.integer("priority", 0), name=job.text("name", "", nonempty=False),
            run=run, run_limit=run_limit, gpus=gpu.num if gpu is not None else 0,
            gpu_mode=gpu.mode if gpu is not None else "shared",
            gpu_exclusive=gpu is not None and gpu.exclusive,
            array=array, index=index, array_limit=limit, depend=depend,
            end_orphan=job.flag("end_orphan", False), hosts=m_hosts,
            exclusive=job.flag("exclusive", False),
        )
        events.append((JobSubmitted(job=spec), False))
        if job.flag("hold", False):
            events.append((JobHeld(job=spec.id), False))
        if state in ("DONE", "EXIT"):
            events.append((_ended(job, spec.id, state), False))
    if state == "RUN":
        start = job.number("start", 0.0)
        events.append((JobStarted(job=ids[0], hosts=hosts, time=start), True))
    return events
