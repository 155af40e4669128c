"""The token ledger (src/xce/controller/tokens.py): each step moves tokens between
in flight, borrowed and returning; illegal steps are named, never applied; the ledger
is rebuilt from its facts and survives a snapshot, including an old one without it."""

from __future__ import annotations

import asyncio
import math
from collections.abc import Callable, Coroutine
from pathlib import Path

import msgspec
import pytest

from xce.config.loader import load_config_text
from xce.controller import supply
from xce.controller.core import Controller
from xce.controller.kernel import _Snapshot
from xce.controller.problems import ApiProblem
from xce.controller.store import SqliteStore
from xce.controller.tokens import PoolTokens, TokenLedger
from xce.model.api import CatalogRequest
from xce.model.events import (
    ConfigLoaded,
    HostStateChanged,
    JobFinished,
    JobStarted,
    JobSubmitted,
    SupplyChanged,
    TokensChanged,
)
from xce.model.jobs import JobSpec
from xce.model.lifecycle import TOKEN_LIFE, TOKEN_STEPS, TokenState
from xce.sched import SchedulerState


def steps(ledger: TokenLedger, *facts: tuple[str, str, float]) -> TokenLedger:
    for pool, step, amount in facts:
        assert ledger.refusal(pool, step, amount) is None, (pool, step, amount)
        ledger.apply(TokensChanged(pool=pool, step=step, amount=amount))
    return ledger


def test_a_borrow_and_its_return_go_through_every_place() -> None:
    ledger = TokenLedger()
    assert ledger.of("vcs") == PoolTokens()
    steps(ledger, ("vcs", "borrow_requested", 3))
    assert ledger.of("vcs") == PoolTokens(in_flight=3)
    steps(ledger, ("vcs", "granted", 2), ("vcs", "refused", 1))
    assert ledger.of("vcs") == PoolTokens(borrowed=2), "granted tokens join the total"
    steps(ledger, ("vcs", "return_requested", 1.5))
    assert ledger.of("vcs") == PoolTokens(borrowed=0.5, returning=1.5)
    assert ledger.returning() == [("vcs", 1.5)]
    steps(ledger, ("vcs", "returned", 1.5), ("vcs", "return_requested", 0.5),
          ("vcs", "returned", 0.5))
    assert ledger.of("vcs") == PoolTokens() and ledger.pools == {}, "nothing left: forgotten"


def test_pools_are_kept_apart() -> None:
    ledger = steps(TokenLedger(), ("vcs", "borrow_requested", 2),
                   ("hspice/cloud", "borrow_requested", 1), ("hspice/cloud", "granted", 1))
    assert ledger.of("vcs") == PoolTokens(in_flight=2)
    assert ledger.of("hspice/cloud") == PoolTokens(borrowed=1)
    assert ledger.refusal("vcs", "return_requested", 1) is not None


@pytest.mark.parametrize(("step", "amount", "words"), [
    ("granted", 3, "cannot grant 3 tokens of vcs: 2 in flight"),
    ("refused", 2.5, "cannot refuse 2.5 tokens of vcs: 2 in flight"),
    ("return_requested", 1.5, "cannot return 1.5 tokens of vcs: 1 borrowed"),
    ("returned", 0.5, "cannot complete the return of 0.5 tokens of vcs: 0 returning"),
    ("granted", 0, "above 0"),
    ("borrow_requested", -1, "above 0"),
    ("borrow_requested", math.nan, "above 0"),
    ("borrow_requested", math.inf, "above 0"),
    ("lent", 1, "unknown step 'lent'"),
])
def test_illegal_steps_are_named(step: str, amount: float, words: str) -> None:
    ledger = steps(TokenLedger(), ("vcs", "borrow_requested", 3), ("vcs", "granted", 1))
    assert ledger.of("vcs") == PoolTokens(in_flight=2, borrowed=1)
    why = ledger.refusal("vcs", step, amount)
    assert why is not None and words in why, why


def test_rounding_errors_neither_refuse_nor_linger() -> None:
    ledger = steps(TokenLedger(), ("vcs", "borrow_requested", 0.1),
                   ("vcs", "borrow_requested", 0.2), ("vcs", "granted", 0.3))
    assert ledger.of("vcs").in_flight == 0.0 and ledger.of("vcs").borrowed == 0.3


def test_after_does_not_apply_and_other_facts_are_ignored() -> None:
    ledger = steps(TokenLedger(), ("vcs", "borrow_requested", 2))
    assert ledger.after("vcs", "granted", 2) == PoolTokens(borrowed=2)
    ledger.apply(JobFinished(job=1))
    assert ledger.of("vcs") == PoolTokens(in_flight=2)


def test_a_bad_logged_step_never_stops_recovery() -> None:
    ledger = TokenLedger()
    ledger.apply(TokensChanged(pool="vcs", step="granted", amount=1))  # nothing in flight
    ledger.apply(TokensChanged(pool="vcs", step="lent", amount=1))
    assert ledger.of("vcs") == PoolTokens(borrowed=1), "applied as far as it goes, not raised"


def test_every_step_moves_between_known_places() -> None:
    places = {"lender", "in_flight", "borrowed", "returning"}
    for step, (source, target) in TOKEN_STEPS.items():
        why = TOKEN_LIFE.edges[(source, target)]
        assert source in places and target in places and source != target and why, step
    assert set(TOKEN_STEPS.values()) == set(TOKEN_LIFE.edges), "a step for every edge"
    kept = set(PoolTokens.__struct_fields__)
    assert kept == {p for p in TokenState if p is not TokenState.LENDER}


def test_the_ledger_survives_a_snapshot_and_old_snapshots_still_decode() -> None:
    ledger = steps(TokenLedger(), ("vcs", "borrow_requested", 4), ("vcs", "granted", 3),
                   ("vcs", "return_requested", 1))
    kept = _Snapshot(last_job_id=7, finished=[], tokens=ledger.snapshot())
    decoded = msgspec.msgpack.decode(msgspec.msgpack.encode(kept), type=_Snapshot)
    again = TokenLedger()
    again.restore(decoded.tokens)
    assert again.pools == ledger.pools == {"vcs": PoolTokens(1, 2, 1)}
    ledger.apply(TokensChanged(pool="vcs", step="returned", amount=1))
    assert again.of("vcs").returning == 1, "a restored ledger is a copy"

    class OldSnapshot(msgspec.Struct):
        last_job_id: int
        finished: list[object]

    old = msgspec.msgpack.decode(msgspec.msgpack.encode(OldSnapshot(3, [])), type=_Snapshot)
    assert old.tokens == {} and old.last_job_id == 3


# ---------------------------------------------------------------- the scheduler follows
CONFIG = """\
cluster: t
resources:
  vcs: {type: numeric, consumable: true, shared: true}
hosts:
  - {name: n1, slots: 2}
shared:
  vcs: {total: 1}
catalog:
  countables:
    - {resource: vcs, max_borrow: 4}
"""


def test_a_changed_configuration_keeps_borrowed_tokens() -> None:
    state = SchedulerState(load_config_text(CONFIG))
    state.apply(SupplyChanged(tokens_in_flight={"vcs": 1}, borrowed={"vcs": 2},
                              headroom={"vcs": 1}))
    state.apply(ConfigLoaded(load_config_text(CONFIG.replace("max_borrow: 4", "max_borrow: 5"))))
    pool = state.pool_by_key("vcs")
    assert (pool.base, pool.borrowed, pool.tokens_in_flight, pool.headroom) == (1, 2, 1, 1), (
        "borrowed tokens are held from the lender whatever the configuration says")
    assert pool.countable is not None and pool.countable.max_borrow == 5


def test_a_negative_headroom_lifts_the_runtime_one() -> None:
    state = SchedulerState(load_config_text(CONFIG))
    state.apply(SupplyChanged(borrowed={"vcs": 1}, headroom={"vcs": 0.5}))
    assert state.pool_by_key("vcs").available_headroom() == 0.5
    state.apply(SupplyChanged(headroom={"vcs": -1}))
    assert state.pool_by_key("vcs").headroom is None
    assert state.pool_by_key("vcs").available_headroom() == 3, "max_borrow less borrowed"


# ---------------------------------------------------------------- the controller, in process
def run(test: Callable[[], Coroutine[object, object, None]]) -> None:
    asyncio.run(test())


async def controller(path: Path) -> Controller:
    ctl = Controller(load_config_text(CONFIG), SqliteStore(path / "xce.db"), clock=lambda: 1000.0)
    await ctl.start()
    return ctl


async def stop(ctl: Controller) -> None:
    await ctl.close()
    ctl.store.close()


def vcs(ctl: Controller) -> tuple[float, ...]:
    """(borrowed, in flight, returning, in use, total) of vcs."""
    info = supply.pool_info(ctl, ctl.state.pool_by_key("vcs"))
    return info.borrowed, info.in_flight, info.returning, info.in_use, info.base + info.borrowed


async def running_job(ctl: Controller, job: int) -> None:
    spec = JobSpec(id=job, user="u", queue="normal", n=1, res="rusage[vcs=1]", submit=1.0)
    await ctl.commit(1000.0, [JobSubmitted(spec), JobStarted(job, {"n1": 1}, 1000.0)])


def test_returns_complete_only_once_the_tokens_are_free(tmp_path: Path) -> None:
    async def test() -> None:
        ctl = await controller(tmp_path)
        await ctl.commit(1000.0, [HostStateChanged("n1", "ok", 1000.0)])
        await supply.tokens_step(ctl, "vcs", "borrow_requested", 2)
        await supply.tokens_step(ctl, "vcs", "granted", 2)
        for job in (1, 2, 3):
            await running_job(ctl, job)
        assert vcs(ctl) == (2, 0, 0, 3, 3)
        await supply.tokens_step(ctl, "vcs", "return_requested", 1)
        assert vcs(ctl) == (1, 0, 1, 3, 2), "out of the total at once"
        await supply.settle_returns(ctl)
        assert vcs(ctl)[2] == 1, "3 in use, 2 left: the returned token is still held"
        await ctl.commit(1000.0, [JobFinished(1, 1000.0)])
        await supply.settle_returns(ctl)
        assert vcs(ctl) == (1, 0, 0, 2, 2), "in use fits the total: returned"
        steps = [e.step for _t, e in _facts(ctl) if isinstance(e, TokensChanged)]
        assert steps == ["borrow_requested", "granted", "return_requested", "returned"]
        await stop(ctl)

    run(test)


def test_a_return_waits_for_the_running_session(tmp_path: Path) -> None:
    """A session that started before the return could hand the returned tokens out:
    the return is logged only once it is over."""

    async def test() -> None:
        ctl = await controller(tmp_path)
        await supply.tokens_step(ctl, "vcs", "borrow_requested", 1)
        await supply.tokens_step(ctl, "vcs", "granted", 1)
        ctl.reading()  # as while a session runs
        waiting = asyncio.create_task(supply.tokens_step(ctl, "vcs", "return_requested", 1))
        await asyncio.sleep(0.05)
        assert not waiting.done() and ctl.tokens.of("vcs").returning == 0
        ctl.done_reading()  # wakes the waiting step (an event, no polling)
        assert (await waiting).returning == 1
        await stop(ctl)

    run(test)


def test_the_ledger_and_the_scheduler_recover_from_a_snapshot_and_facts(tmp_path: Path) -> None:
    async def test() -> None:
        ctl = await controller(tmp_path)
        await supply.tokens_step(ctl, "vcs", "borrow_requested", 3)
        await supply.tokens_step(ctl, "vcs", "granted", 2)
        await supply.set_catalog(ctl, CatalogRequest(headroom={"vcs": 0.5}))
        await ctl.snapshot()
        await supply.tokens_step(ctl, "vcs", "return_requested", 0.5)
        before = (vcs(ctl), ctl.tokens.pools, supply.catalog(ctl))
        await stop(ctl)
        again = await controller(tmp_path)
        assert (vcs(again), again.tokens.pools, supply.catalog(again)) == before
        assert before[0] == (1.5, 1, 0.5, 0, 2.5)
        await stop(again)

    run(test)


def test_refused_steps_log_nothing(tmp_path: Path) -> None:
    async def test() -> None:
        ctl = await controller(tmp_path)
        last = len(_facts(ctl))
        for key, step, amount, status in [
            ("vcs", "granted", 1, 409), ("vcs", "borrow_requested", 4.5, 409),
            ("vcs", "borrow_requested", 0, 400), ("vcs", "returned", 1, 400),
            ("mem", "borrow_requested", 1, 404),
        ]:
            with pytest.raises(ApiProblem) as refused:
                await supply.tokens_step(ctl, key, step, amount)
            assert refused.value.status == status, (key, step, amount, refused.value.message)
        assert len(_facts(ctl)) == last and ctl.tokens.pools == {}
        await stop(ctl)

    run(test)


def _facts(ctl: Controller) -> list[tuple[float, object]]:
    return [(fact.time, fact.event) for fact in ctl.store.read()]


# ---------------------------------------------------------------- the CLI's tables
def test_cli_tables_say_when_there_is_nothing() -> None:
    from xce.cli.supply_cmds import catalog_lines, resources_lines
    from xce.model.api import CatalogInfo, PoolInfo, ResourceList

    assert resources_lines(ResourceList([])) == ["No shared resource."]
    assert catalog_lines(CatalogInfo([], [])) == [
        "", "The catalog has no template and no countable resource."]
    site = PoolInfo(resource="hspice", pool="hspice/site", base=1.5, borrowed=0, in_flight=0,
                    returning=0, in_use=0.5, free=1, headroom=0)
    assert resources_lines(ResourceList([site])) == [
        "RESOURCE  POOL  BASE  BORROWED  IN_FLIGHT  RETURNING  IN_USE  FREE  HEADROOM",
        "hspice    site   1.5         0          0          0     0.5     1         -",
    ], "fractional tokens as they are; a pool that cannot borrow has no headroom"
