"""Dependency conditions (`-w`): has this job's condition been met, can it ever be?

A dependent's condition is bound when it is submitted (a `Dependency`): every job it
names is resolved to job ids then (an id, an array's elements, or the most recent job
of a name: see `targets`), and stays so. Each condition of the expression (a `Leaf`)
keeps which of its jobs do not satisfy it yet (`unmet`), which have not ended
(`unended`), and whether one never can (`dead`: done() of a job that exited). Leaves
are indexed by the jobs they name (sched/waiting.py), so a job starting or ending
updates only the leaves that name it; a condition on several jobs (an array) holds
when it holds for each.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final, NoReturn

from xce.model.jobs import JobSpec
from xce.resreq.depend import (
    DONE,
    ENDED,
    EXIT,
    POST_DONE,
    STARTED,
    All,
    Condition,
    DependError,
    JobRef,
    Node,
    Not,
    compare,
    parse_depend,
)
from xce.sched.errors import SubmitError
from xce.sched.waitlist import WaitList

if TYPE_CHECKING:
    from xce.sched.state import SchedulerState
    from xce.sched.waiting import Waits

# A named job's status, as conditions read it (GONE: not known to the state).
PEND: Final = 0
RUN: Final = 1
DONE_STATE: Final = 2
EXIT_STATE: Final = 3
GONE: Final = 4

NOT_SATISFIED: Final = "Dependency condition not satisfied: {part}"
NEVER: Final = "Dependency condition can never be satisfied"


def verdict(test: Condition, status: int, code: int | None) -> tuple[bool, bool]:
    """Whether one job in `status` (and exit `code`) satisfies `test`, and whether it
    never can. XCE has no post-execution commands: a job's post-processing is done,
    without errors, as soon as it ends (post_done holds, post_err never can)."""
    if status == GONE:
        return False, True
    ended = status >= DONE_STATE
    kind = test.kind
    if kind == DONE:
        return status == DONE_STATE, status == EXIT_STATE
    if kind == EXIT:
        met = status == EXIT_STATE and (
            test.op == "" or (code is not None and compare(code, test.op, test.code))
        )
        return met, ended and not met
    if kind in (ENDED, POST_DONE):
        return ended, False
    if kind == STARTED:
        return status != PEND, False
    return False, ended  # post_err


class Leaf:
    """One condition of a dependency expression, over the jobs it names."""

    __slots__ = ("cond", "dead", "owner", "targets", "unended", "unmet")

    def __init__(self, test: Condition, targets: tuple[int, ...]) -> None:
        self.cond = test
        self.targets = targets
        self.unmet: set[int] = set()
        self.unended: set[int] = set()
        self.dead = False
        self.owner: Dependency | None = None  # the dependency it is part of

    def set(self, job: int, status: int, code: int | None) -> None:
        """`job` (one of the targets) is now in `status`."""
        met, dead = verdict(self.cond, status, code)
        if met:
            self.unmet.discard(job)
        else:
            self.unmet.add(job)
        if status >= DONE_STATE:
            self.unended.discard(job)
        else:
            self.unended.add(job)
        if dead:
            self.dead = True


class Term:
    """A node of a bound expression: a leaf, or `!`, `&&`, `||` over terms."""

    __slots__ = ("kind", "leaf", "parts", "text")

    def __init__(self, kind: str, text: str, parts: tuple[Term, ...] = (),
                 leaf: Leaf | None = None) -> None:
        self.kind = kind  # "leaf", "not", "all", "any"
        self.text = text
        self.parts = parts
        self.leaf = leaf


def met(term: Term) -> bool:
    if term.leaf is not None:
        return not term.leaf.unmet
    if term.kind == "not":
        return not met(term.parts[0])
    if term.kind == "all":
        return all(met(part) for part in term.parts)
    return any(met(part) for part in term.parts)


def never(term: Term) -> bool:
    """Whether the term is false and will stay so whatever happens."""
    if term.leaf is not None:
        return term.leaf.dead
    if term.kind == "not":
        return always(term.parts[0])
    if term.kind == "all":
        return any(never(part) for part in term.parts)
    return all(never(part) for part in term.parts)


def always(term: Term) -> bool:
    """Whether the term is true and will stay so (its jobs have ended)."""
    if term.leaf is not None:
        return not term.leaf.unmet and not term.leaf.unended
    if term.kind == "not":
        return never(term.parts[0])
    if term.kind == "all":
        return all(always(part) for part in term.parts)
    return any(always(part) for part in term.parts)


def unmet_text(term: Term) -> str:
    """The part of a false term that is not satisfied: the first false operand of
    `&&`, else the term itself."""
    if term.kind == "all":
        for part in term.parts:
            if not met(part):
                return unmet_text(part)
    return term.text


class Dependency:
    """A bound dependency expression and the pending jobs that wait on it (one job's,
    or shared by the elements of an array)."""

    __slots__ = ("blocked", "end_orphan", "key", "leaves", "members", "met", "never",
                 "since", "term")

    def __init__(self, term: Term, leaves: list[Leaf], end_orphan: bool, since: float) -> None:
        self.term = term
        self.leaves = leaves
        self.end_orphan = end_orphan  # LSF's -ti: end its jobs once it can never hold
        self.members: set[int] = set()  # its pending jobs (queued, waiting or held)
        self.blocked = WaitList()  # its jobs waiting for it
        self.key: tuple[int, str] | None = None  # (array, expression) when shared
        self.met = False
        self.never = False
        self.since = since  # when it was found that it can never hold
        for leaf in leaves:
            leaf.owner = self
        self.evaluate()

    def evaluate(self) -> None:
        self.met = met(self.term)
        self.never = not self.met and never(self.term)

    def reason(self) -> str:
        """Why its jobs pend."""
        if self.never:
            return NEVER
        return NOT_SATISFIED.format(part=unmet_text(self.term))


def bind(state: SchedulerState, waits: Waits, spec: JobSpec, strict: bool) -> Dependency:
    """`spec`'s dependency with its jobs resolved (SubmitError naming the column of a
    job that cannot be found when `strict`; otherwise such a job is GONE)."""
    try:
        node = parse_depend(spec.depend)
    except DependError as err:
        raise SubmitError(str(err)) from err
    leaves: list[Leaf] = []
    term = _term(state, waits, spec, node, strict, leaves)
    since = spec.submit
    for leaf in leaves:
        for job in leaf.targets:
            status, code = status_of(state, waits, job)
            leaf.set(job, status, code)
            ended = waits.memory.ended.get(job)
            if leaf.dead and ended is not None and ended.time > since:
                since = ended.time
    return Dependency(term, leaves, spec.end_orphan, since)


def _term(state: SchedulerState, waits: Waits, spec: JobSpec, node: Node, strict: bool,
          leaves: list[Leaf]) -> Term:
    if isinstance(node, Condition):
        leaf = Leaf(node, targets(state, waits, node.ref, spec, strict))
        leaves.append(leaf)
        return Term("leaf", node.text, leaf=leaf)
    if isinstance(node, Not):
        return Term("not", node.text, (_term(state, waits, spec, node.operand, strict, leaves),))
    kind = "all" if isinstance(node, All) else "any"
    parts = tuple(_term(state, waits, spec, part, strict, leaves) for part in node.parts)
    return Term(kind, node.text, parts)


def status_of(state: SchedulerState, waits: Waits, job: int) -> tuple[int, int | None]:
    """A job's status and exit code, as conditions read them."""
    if job in state.running:
        return RUN, None
    if job in state._submitted:
        return PEND, None
    ended = waits.memory.ended.get(job)
    if ended is None:
        return GONE, None
    return (DONE_STATE if ended.done else EXIT_STATE), ended.exit_code


def targets(state: SchedulerState, waits: Waits, ref: JobRef, spec: JobSpec,
            strict: bool) -> tuple[int, ...]:
    """The job ids `ref` names for the dependent `spec`. A name is the user's own:
    the most recent job (or array) of that name submitted before the dependent
    (a wildcard: that of each matching name); an array (by id or name) is every
    element the state knows, or those of `[indices]`, or with `[*]` the one of the
    dependent's index."""
    if ref.job is not None:
        return _unit_targets(state, waits, ref.job, ref, spec, strict)
    assert ref.name is not None
    before, memory = (spec.submit, spec.id), waits.memory
    own = spec.array if spec.array else -1  # a job array is not among its names' jobs
    if ref.wildcard:
        units = memory.matching(spec.user, ref.name, before, own)
        if not units:
            _refuse(ref, f"no job of {spec.user} has a name starting with '{ref.name}'")
        return tuple(t for unit in units
                     for t in _unit_targets(state, waits, unit, ref, spec, strict))
    found = memory.latest(spec.user, ref.name, before, own)
    if found is None:
        if spec.array and spec.name == ref.name:
            _refuse(ref, "a job array cannot depend on its own elements")
        _refuse(ref, f"no job of {spec.user} is named '{ref.name}'")
    return _unit_targets(state, waits, found, ref, spec, strict)


def _unit_targets(state: SchedulerState, waits: Waits, unit: int, ref: JobRef,
                  spec: JobSpec, strict: bool) -> tuple[int, ...]:
    if spec.array and unit == spec.array:
        _refuse(ref, "a job array cannot depend on its own elements")
    record = waits.arrays.get(unit)
    if record is None:
        if ref.indices is not None or ref.each:
            _refuse(ref, f"job {unit} is not a job array")
        if strict and unit not in state._submitted and unit not in waits.memory.ended:
            _refuse(ref, f"job {unit} is not found")
        return (unit,)
    if ref.each:
        if not spec.array:
            _refuse(ref, "[*] names the element of the dependent's own index: only the "
                    "elements of a job array may use it")
        wanted: tuple[int, ...] = (spec.index,)
    elif ref.indices is not None:
        wanted = ref.indices
    else:
        return tuple(sorted(record.elements))
    found: list[int] = []
    for index in wanted:
        job = unit + index
        if strict and job not in record.elements:
            _refuse(ref, f"job array {unit} has no element {index}")
        found.append(job)
    return tuple(found)


def _refuse(ref: JobRef, message: str) -> NoReturn:
    raise SubmitError(str(DependError(ref.column, message)))
