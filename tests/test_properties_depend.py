"""Properties of dependencies and job arrays over random simulated workloads (issue 21).

Hypothesis draws workloads of plain jobs and small arrays (some with a `%N` limit),
with random exit codes and dependency conditions on earlier jobs (by id, name,
wildcard, array element, whole array, one to one), and runs them through the
simulator with a recording. An independent checker follows the recorded events and
evaluates every condition itself, as docs/cli.md defines them:

* a dependent never starts before its condition holds (when the session that
  dispatches it runs: a session's dispatches start together);
* no session's demand names a job whose condition does not hold;
* an array never runs more elements at once than its limit;
* when the run is over, no job that never ran waits with its condition holding.
"""

from __future__ import annotations

import tempfile
import textwrap
from dataclasses import dataclass, field
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from xce.config import load_config_text
from xce.model.events import JobFinished, JobKilled, JobRequeued, JobStarted, JobSubmitted
from xce.model.jobs import JobSpec
from xce.model.recording import Recorder, SessionRecord, read_recording
from xce.resreq.depend import All, Any, Condition, JobRef, Node, Not, compare, parse_depend
from xce.sim.driver import Simulator
from xce.sim.workload import load_workload

CLUSTER = """
    cluster: prop
    session_interval: 5
    hosts: [{name: n01, slots: 3}]
    catalog:
      templates:
        - {name: cloud, provider: sim, slots: 2, max: 2}
    policy: {persistence: 0}
    simulation:
      providers: {sim: {lead_time: 20}}
"""
KINDS = ("done", "exit", "ended", "started", "post_done", "post_err")


@dataclass
class Drawn:
    id: int
    user: str
    name: str
    indices: tuple[int, ...]  # () for a plain job
    limit: int


@st.composite
def references(draw: st.DrawFn, earlier: list[Drawn], me: Drawn) -> str:
    target = draw(st.sampled_from(earlier))
    style = draw(st.sampled_from(["id", "id", "element", "each", "name", "wild"]))
    if style == "element" and target.indices:
        return f"{target.id}[{draw(st.sampled_from(target.indices))}]"
    if style == "each" and target.indices and me.indices:
        return f"{target.id}[*]"
    if style in ("name", "wild") and target.name and target.user == me.user:
        return target.name[:1] + "*" if style == "wild" else target.name
    return str(target.id)


@st.composite
def expressions(draw: st.DrawFn, earlier: list[Drawn], me: Drawn, depth: int = 0) -> str:
    choice = draw(st.integers(0, 5 if depth < 2 else 2))
    if choice <= 2:
        kind = draw(st.sampled_from(KINDS))
        ref = draw(references(earlier, me))
        if kind == "exit" and draw(st.booleans()):
            op = draw(st.sampled_from(["", "==", "!=", ">", "<=" ]))
            return f"exit({ref}, {op}{draw(st.integers(0, 3))})"
        return f"{kind}({ref})"
    if choice == 3:
        return "!" + draw(expressions(earlier, me, depth + 1))
    op = " && " if choice == 4 else " || "
    left = draw(expressions(earlier, me, depth + 1))
    return f"({left}{op}{draw(expressions(earlier, me, depth + 1))})"


@st.composite
def workloads(draw: st.DrawFn) -> str:
    lines = ["jobs:"]
    earlier: list[Drawn] = []
    for number in range(1, draw(st.integers(2, 9)) + 1):
        size = draw(st.sampled_from([0, 0, 0, 2, 3, 4]))
        me = Drawn(number * 10, draw(st.sampled_from(["u1", "u2"])),
                   draw(st.sampled_from(["", "", "a", "ab", "b"])),
                   tuple(range(1, size + 1)), draw(st.sampled_from([0, 1, 2])) if size else 0)
        keys = [f"id: {me.id}", f"submit: {number}", f"user: {me.user}",
                f"run: {draw(st.integers(1, 40))}", f"exit: {draw(st.sampled_from([0, 0, 1, 2]))}",
                f"n: {draw(st.sampled_from([1, 1, 2]))}"]
        if me.name:
            keys.append(f"name: {me.name}")
        if size:
            keys.append(f'array: "1-{size}' + (f'%{me.limit}"' if me.limit else '"'))
        if earlier and draw(st.integers(0, 9)) < 7:
            keys.append(f"depend: {draw(expressions(earlier, me))!r}")
            if draw(st.integers(0, 5)) == 0:
                keys.append("end_orphan: true")
        lines.append("  - {" + ", ".join(keys) + "}")
        earlier.append(me)
    return "\n".join(lines) + "\n"


@dataclass
class Checker:
    """Job states from the recorded events, and conditions evaluated on them."""

    specs: dict[int, JobSpec] = field(default_factory=dict)
    status: dict[int, str] = field(default_factory=dict)  # PEND RUN DONE EXIT
    codes: dict[int, int | None] = field(default_factory=dict)

    def elements(self, array: int) -> list[int]:
        return sorted(j for j, s in self.specs.items() if s.array == array)

    def unit(self, spec: JobSpec, name: str) -> int | None:
        """The dependent's own most recent job or array of that name."""
        units = {
            (s.submit, s.array or s.id): s.array or s.id for s in self.specs.values()
            if s.user == spec.user and s.name == name and s.submit <= spec.submit
            and (s.array or s.id) not in (spec.id, spec.array)
        }
        return units[max(units)] if units else None

    def targets(self, ref: JobRef, spec: JobSpec) -> list[int]:
        if ref.job is not None:
            units = [ref.job]
        elif ref.wildcard:
            names = {s.name for s in self.specs.values() if s.name.startswith(ref.name or "")}
            units = [u for n in sorted(names) if (u := self.unit(spec, n)) is not None]
        else:
            found = self.unit(spec, ref.name or "")
            units = [] if found is None else [found]
        jobs: list[int] = []
        for unit in units:
            if ref.each:
                jobs.append(unit + spec.index)
            elif ref.indices is not None:
                jobs.extend(unit + i for i in ref.indices)
            else:
                jobs.extend(self.elements(unit) or [unit])
        return jobs

    def one(self, kind: str, op: str, code: int, job: int) -> bool:
        state = self.status.get(job, "PEND")
        ended = state in ("DONE", "EXIT")
        if kind == "done":
            return state == "DONE"
        if kind == "exit":
            got = self.codes.get(job)
            return state == "EXIT" and (op == "" or (got is not None and compare(got, op, code)))
        if kind in ("ended", "post_done"):
            return ended
        if kind == "started":
            return state != "PEND"
        return False  # post_err: no post-execution in XCE

    def holds(self, node: Node, spec: JobSpec) -> bool:
        if isinstance(node, Condition):
            return all(self.one(node.kind, node.op, node.code, job)
                       for job in self.targets(node.ref, spec))
        if isinstance(node, Not):
            return not self.holds(node.operand, spec)
        if isinstance(node, All):
            return all(self.holds(part, spec) for part in node.parts)
        assert isinstance(node, Any)
        return any(self.holds(part, spec) for part in node.parts)

    def ready(self, job: int) -> bool:
        spec = self.specs[job]
        return not spec.depend or self.holds(parse_depend(spec.depend), spec)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(workloads())
def test_dependents_start_only_once_their_condition_holds_and_limits_hold(text: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        jobs, recording = Path(tmp) / "jobs.yaml", Path(tmp) / "run.jsonl"
        jobs.write_text(text)
        config = load_config_text(textwrap.dedent(CLUSTER), "cluster.yaml")
        recorder = Recorder(recording)
        sim = Simulator(config, load_workload(jobs), recorder=recorder)
        sim.run()
        recorder.close()
        check = Checker()
        seen = check  # the states as the last session saw them (its dispatches start then)
        running: dict[int, int] = {}  # array -> elements running
        for _line, _t, item in read_recording(recording):
            if isinstance(item, SessionRecord):
                seen = Checker(check.specs, dict(check.status), dict(check.codes))
                for entry in item.outputs["demand"]["hosts"]:
                    for job in entry["jobs"]:
                        assert check.ready(job), (
                            f"job {job} is in demand while its condition "
                            f"{check.specs[job].depend!r} does not hold\n{text}"
                        )
                continue
            match item:
                case JobSubmitted(job=spec):
                    check.specs[spec.id], check.status[spec.id] = spec, "PEND"
                case JobStarted(job=job):
                    assert seen.ready(job), (
                        f"job {job} started before {check.specs[job].depend!r} held\n{text}"
                    )
                    spec = check.specs[job]
                    check.status[job] = "RUN"
                    if spec.array:
                        running[spec.array] = running.get(spec.array, 0) + 1
                        assert not spec.array_limit or running[spec.array] <= spec.array_limit, (
                            f"array {spec.array} runs more than {spec.array_limit}\n{text}"
                        )
                case JobFinished(job=job) | JobKilled(job=job) | JobRequeued(job=job):
                    spec = check.specs[job]
                    if spec.array and check.status[job] == "RUN":
                        running[spec.array] -= 1
                    if isinstance(item, JobRequeued):
                        check.status[job] = "PEND"
                    else:
                        done = isinstance(item, JobFinished) and item.done
                        check.status[job] = "DONE" if done else "EXIT"
                        code = item.exit_code if isinstance(item, JobFinished) else None
                        check.codes[job] = None if code is None or code < 0 else code
        for job, state in check.status.items():
            if state == "PEND":
                assert not check.ready(job), (
                    f"job {job} never ran though {check.specs[job].depend!r} holds\n{text}"
                )
