"""The `license` provider against a real `xce license-pool` (a subprocess, over HTTP):
it describes the pools with the features' totals, borrows (0 when the pool is empty:
no error) and gives back (the last lease in part), keeps its leases alive with its
renewal thread, loses them at the pool when its process is killed -9, and a new
instance of the same holder adopts them. Bad configuration is a ConfigError naming
file, line and field."""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from licensepool import PoolServer, pool_server
from live import free_port, wait_for

from xce.config import ConfigError, load_config_text
from xce.config.providers.file import load_providers
from xce.config.providers.license import load_license_config
from xce.provisioner.provider import Description, PoolOffer, ProviderError
from xce.provisioner.providers.license import LicenseProvider
from xce.provisioner.registry import ProviderContext, build_providers

CLUSTER = """\
cluster: t
resources:
  vcs: {type: numeric, consumable: true, shared: true}
  hspice: {type: numeric, consumable: true, shared: true}
hosts:
  - {name: n1, slots: 1}
shared:
  vcs: {total: 0}
  hspice:
    - {pool: site, total: 2}
    - {pool: cloud, total: 0}
queues:
  - {name: normal, priority: 30}
catalog:
  countables:
    - {resource: vcs, max_borrow: 4}
    - {resource: hspice, pool: cloud, max_borrow: 8}
"""
HOLDER = "t/lic"  # <cluster>/<provider>
FEATURES = {"vcs": 4, "hspice": 8}


def setup_files(root: Path, url: str, ttl: float = 60, extra: str = "") -> Path:
    """The providers file (one license provider, `lic`) with its conf directory."""
    (root / "cluster.yaml").write_text(CLUSTER)
    conf = root / "conf" / "lic"
    conf.mkdir(parents=True, exist_ok=True)
    (conf / "license.yaml").write_text(
        f"url: {url}\nlease_ttl: {ttl}\n{extra}pools:\n  vcs: vcs\n  hspice/cloud: hspice\n")
    providers = root / "providers.json"
    providers.write_text('{"providers": [{"name": "lic", "type": "license", '
                         '"confPath": "conf/lic"}]}')
    return providers


def build(root: Path) -> LicenseProvider:
    """The provider as `xce provisioner run --providers` builds it."""
    context = ProviderContext(load_config_text(CLUSTER), "http://127.0.0.1:1", str(root))
    built = build_providers(load_providers(root / "providers.json"), context)["lic"]
    assert isinstance(built, LicenseProvider)
    return built


@pytest.fixture
def server(tmp_path: Path) -> Iterator[PoolServer]:
    with pool_server(tmp_path, FEATURES) as running:
        yield running


@pytest.fixture
def provider(tmp_path: Path, server: PoolServer) -> Iterator[LicenseProvider]:
    setup_files(tmp_path, server.url)
    made = build(tmp_path)
    try:
        yield made
    finally:
        made.close()


def refusal(call: object, *args: object) -> tuple[str, str]:
    assert callable(call)
    with pytest.raises(ProviderError) as caught:
        call(*args)
    return caught.value.kind, str(caught.value)


def held(server: PoolServer) -> list[tuple[str, float]]:
    return [(lease["feature"], lease["amount"]) for lease in server.leases(HOLDER)]


# ---------------------------------------------------------------- describing
def test_describe_offers_the_pools_and_no_hosts(provider: LicenseProvider) -> None:
    assert provider.describe() == Description(
        provider="lic", templates=(),
        pools=(PoolOffer("hspice/cloud", 8.0), PoolOffer("vcs", 4.0)))
    assert provider.instances() == []
    kind, message = refusal(provider.request_hosts, "r1", "loc", [])
    assert kind == "request" and "serves no host templates" in message
    provider.release([])  # nothing to release: nothing happens
    kind, message = refusal(provider.release, ["local-loc-1"])
    assert kind == "request" and "no such instance: local-loc-1" in message


# ---------------------------------------------------------------- tokens
def test_borrow_and_give_back(provider: LicenseProvider, server: PoolServer,
                              caplog: pytest.LogCaptureFixture) -> None:
    assert provider.borrow("vcs", 3) == 3
    assert provider.borrow("vcs", 3) == 1  # what was left
    assert provider.borrow("vcs", 1) == 0  # the pool is empty: no error, nothing granted
    assert held(server) == [("vcs", 3), ("vcs", 1)]
    assert server.features()["vcs"]["in_use"] == 4

    provider.give_back("vcs", 2)  # the newest lease whole, 1 of the other
    assert held(server) == [("vcs", 2)]
    assert provider.borrow("vcs", 1) == 1
    provider.give_back("vcs", 2)  # the lease of just 2, whole (none in part)
    assert held(server) == [("vcs", 1)]
    provider.give_back("vcs", 1)
    assert held(server) == [] and server.features()["vcs"]["in_use"] == 0

    assert provider.borrow("hspice/cloud", 2.5) == 2.5
    assert held(server) == [("hspice", 2.5)]
    with caplog.at_level(logging.WARNING, "xce.provisioner.license"):
        provider.give_back("hspice/cloud", 4)  # more than held: gives all back, warns
    assert held(server) == []
    assert "1.5 of 4 token(s) of hspice were no longer held at the pool" in caplog.text

    for call, args in ((provider.borrow, ("matlab", 1)), (provider.borrow, ("vcs", 0)),
                       (provider.give_back, ("vcs", -1)), (provider.borrow, ("vcs", float("nan")))):
        kind, _ = refusal(call, *args)
        assert kind == "request", args
    assert server.features()["vcs"]["in_use"] == 0


def test_an_unreachable_pool_is_unavailable(tmp_path: Path, server: PoolServer) -> None:
    setup_files(tmp_path, server.url)
    provider = build(tmp_path)
    try:
        assert provider.describe().pools[1] == PoolOffer("vcs", 4.0)
        server.stop()
        # The last sizes seen: the provisioner's rounds go on.
        assert provider.describe().pools[1] == PoolOffer("vcs", 4.0)
        kind, message = refusal(provider.borrow, "vcs", 1)
        assert kind == "unavailable" and "Connection refused" in message
        assert refusal(provider.give_back, "vcs", 1)[0] == "unavailable"
    finally:
        provider.close()
    setup_files(tmp_path, f"http://127.0.0.1:{free_port()}")
    never = build(tmp_path)
    try:
        assert never.describe().pools == (PoolOffer("hspice/cloud", 0.0), PoolOffer("vcs", 0.0))
    finally:
        never.close()


def test_the_bearer_token_of_the_pool(tmp_path: Path) -> None:
    token = tmp_path / "pool.token"
    token.write_text("pool-secret\n")
    with pool_server(tmp_path, FEATURES, token_file=token) as server:
        (tmp_path / "conf" / "lic").mkdir(parents=True)
        (tmp_path / "conf" / "lic" / "good.token").write_text("pool-secret\n")
        (tmp_path / "conf" / "lic" / "bad.token").write_text("guess\n")
        setup_files(tmp_path, server.url, extra="token_file: good.token\n")
        good = build(tmp_path)
        setup_files(tmp_path, server.url, extra="token_file: bad.token\n")
        bad = build(tmp_path)
        try:
            assert good.borrow("vcs", 1) == 1
            kind, message = refusal(bad.borrow, "vcs", 1)
            assert kind == "unavailable" and "HTTP 401: wrong token" in message
            assert held(server) == [("vcs", 1)]
        finally:
            good.close()
            bad.close()


# ---------------------------------------------------------------- leases
def test_the_renewal_thread_keeps_the_leases_past_their_ttl(tmp_path: Path,
                                                            server: PoolServer) -> None:
    setup_files(tmp_path, server.url, ttl=1)
    provider = build(tmp_path)
    try:
        assert provider.borrow("vcs", 2) == 2
        [lease] = server.leases(HOLDER)
        assert lease["ttl"] == 1
        time.sleep(1.6)
        [still] = server.leases(HOLDER)
        assert still["id"] == lease["id"] and still["renewed"] > lease["granted"] + 0.6
    finally:
        provider.close()
    stopped = time.monotonic()
    wait_for(lambda: server.features()["vcs"]["in_use"] == 0, 3, "the lease to expire")
    assert time.monotonic() - stopped > 0.3  # it expired, it was not given back


CHILD = textwrap.dedent("""\
    import sys, time
    from xce.config import load_config
    from xce.config.providers.file import load_providers
    from xce.provisioner.registry import ProviderContext, build_providers
    root = sys.argv[1]
    context = ProviderContext(load_config(root + "/cluster.yaml"), "http://127.0.0.1:1", root)
    provider = build_providers(load_providers(root + "/providers.json"), context)["lic"]
    print("granted", provider.borrow("vcs", float(sys.argv[2])), flush=True)
    time.sleep(600)
""")


def crash_after_borrowing(root: Path, amount: float, server: PoolServer) -> None:
    """A provisioner process that borrows, renews its lease, and is killed -9."""
    out = root / "child.out"
    with open(out, "wb") as sink:
        child = subprocess.Popen([sys.executable, "-c", CHILD, str(root), str(amount)],
                                 stdout=sink, stderr=subprocess.STDOUT,
                                 start_new_session=True)
    try:
        wait_for(lambda: "granted" in out.read_text(), 20, "the child to borrow")
        assert f"granted {amount:g}" in out.read_text()
        [lease] = server.leases(HOLDER)
        wait_for(lambda: server.leases(HOLDER)[0]["renewed"] > lease["granted"], 5,
                 "the child to renew its lease")
    finally:
        os.killpg(child.pid, signal.SIGKILL)
        child.wait()


def test_the_tokens_of_a_killed_provisioner_expire_at_the_pool(tmp_path: Path,
                                                                server: PoolServer) -> None:
    setup_files(tmp_path, server.url, ttl=1.5)
    crash_after_borrowing(tmp_path, 3, server)
    killed = time.monotonic()
    assert server.features()["vcs"]["in_use"] == 3  # held until it expires
    assert server.borrow("vcs", "t2/lic", 2).status == 409
    wait_for(lambda: server.features()["vcs"]["in_use"] == 0, 4, "the lease to expire")
    assert time.monotonic() - killed <= 1.5 + 1
    assert server.borrow("vcs", "t2/lic", 4).status == 201  # free for another cluster


def test_a_new_instance_adopts_the_leases_of_its_holder(tmp_path: Path,
                                                        server: PoolServer) -> None:
    setup_files(tmp_path, server.url, ttl=1.5)
    crash_after_borrowing(tmp_path, 3, server)
    [lease] = server.leases(HOLDER)
    successor = build(tmp_path)  # no file of the dead one: it finds the leases by holder
    try:
        time.sleep(2)  # past the ttl since the crash
        [adopted] = server.leases(HOLDER)
        assert adopted["id"] == lease["id"] and adopted["renewed"] > lease["renewed"]
        successor.give_back("vcs", 3)
        assert server.features()["vcs"]["in_use"] == 0
    finally:
        successor.close()


# ---------------------------------------------------------------- configuration
def conf_error(root: Path, text: str) -> str:
    conf = root / "conf"
    conf.mkdir(exist_ok=True)
    (conf / "license.yaml").write_text(textwrap.dedent(text))
    with pytest.raises(ConfigError) as caught:
        load_license_config(conf, load_config_text(CLUSTER), "lic")
    return str(caught.value).replace(f"{conf}/", "")


@pytest.mark.parametrize(("text", "error"), [
    ("url: ftp://pool\npools: {vcs: vcs}\n",
     "license.yaml:1: url: expected an http:// or https:// URL, got 'ftp://pool'"),
    ("url: http://pool:7070\nttl: 5\npools: {vcs: vcs}\n",
     "license.yaml:2: ttl: unknown field (known: url, token_file, lease_ttl, timeout, pools)"),
    ("url: http://pool:7070\n",
     "license.yaml:1: pools: missing"),
    ("url: http://pool:7070\npools:\n  vcs: vcs\n  matlab: matlab\n",
     "license.yaml:4: pools.matlab: no countable pool 'matlab' in cluster t "
     "(catalog.countables: hspice/cloud, vcs)"),
    ("url: http://pool:7070\npools:\n  hspice: hspice\n",
     "license.yaml:3: pools.hspice: no countable pool 'hspice' in cluster t "
     "(catalog.countables: hspice/cloud, vcs)"),
    ("url: http://pool:7070\npools:\n  vcs: vcs\n  vcs/default: vcs\n",
     "license.yaml:4: pools.vcs/default: pool vcs is named twice"),
    ("url: http://pool:7070\npools:\n  vcs:\n    - vcs\n",
     "license.yaml:4: pools.vcs: expected a feature name (letters, digits, _ . + -), "
     "got ['vcs']"),
    ("url: http://pool:7070\npools: []\n",
     "license.yaml:2: pools: expected a mapping of pool keys to features, e.g. {vcs: vcs}"),
    ("url: http://pool:7070\nlease_ttl: 0\npools: {vcs: vcs}\n",
     "license.yaml:2: lease_ttl: expected a number of seconds above 0, got 0"),
    ("url: http://pool:7070\ntimeout: yes\npools: {vcs: vcs}\n",
     "license.yaml:2: timeout: expected a number of seconds above 0, got True"),
    ("url: http://pool:7070\ntoken_file: nope.token\npools: {vcs: vcs}\n",
     "license.yaml:2: token_file: cannot read nope.token: No such file or directory"),
    ("url: http://pool:7070\npools: {vcs: vcs\n",
     "license.yaml:2: : invalid YAML"),
    ("- url\n", "license.yaml:1: : expected a mapping with url and pools"),
])
def test_bad_configuration(tmp_path: Path, text: str, error: str) -> None:
    assert conf_error(tmp_path, text).startswith(error)


def test_configuration(tmp_path: Path) -> None:
    conf = tmp_path / "conf"
    conf.mkdir()
    (conf / "pool.token").write_text("sekrit\n")
    (conf / "license.json").write_text(
        '{"url": "http://pool:7070/", "token_file": "pool.token", "lease_ttl": 30,\n'
        ' "pools": {"vcs/default": "vcs", "hspice/cloud": "hspice"}}\n')
    config = load_license_config(conf, load_config_text(CLUSTER), "lic")
    assert (config.url, config.holder, config.token, config.lease_ttl, config.timeout) == (
        "http://pool:7070", "t/lic", "sekrit", 30.0, 10.0)
    assert config.pools == {"vcs": "vcs", "hspice/cloud": "hspice"}  # keys as the catalog's
    missing = tmp_path / "none"
    with pytest.raises(ConfigError) as caught:
        load_license_config(missing, load_config_text(CLUSTER))
    assert str(caught.value).startswith(f"{missing}/license.yaml:0: : cannot read: No such file")


def test_a_license_provider_needs_its_conf_path(tmp_path: Path) -> None:
    (tmp_path / "providers.yaml").write_text(
        "providers:\n  - {name: local, type: local}\n  - {name: lic, type: license}\n")
    specs = load_providers(tmp_path / "providers.yaml")
    context = ProviderContext(load_config_text(CLUSTER), "http://127.0.0.1:1", str(tmp_path))
    with pytest.raises(ConfigError) as caught:
        build_providers(specs, context)
    assert str(caught.value) == (
        f"{tmp_path}/providers.yaml:3: lic.confPath: a license provider needs confPath: "
        "the directory of its license.yaml")
