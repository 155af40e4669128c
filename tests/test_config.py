"""Cluster configuration loading: the example, and one test per validation rule.

Every error test states the exact `file:line: field: message` a user would see.
"""

from __future__ import annotations

import pickle
from pathlib import Path

import pytest

from xce.config import (
    ConfigError,
    MarkedMap,
    MarkedSeq,
    build_config,
    expand_hostnames,
    load_config,
    load_config_text,
    load_yaml,
)
from xce.model.cluster import (
    ClusterConfig,
    Countable,
    HostSpec,
    HostTemplate,
    Limit,
    Queue,
    ResourceDef,
    SharedPool,
)
from xce.model.policy import LeadTime, PolicyConfig, ProviderModel, SimulationConfig, TokenModel

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "cluster.yaml"

# Lines 1-5.
RESOURCES = """\
resources:
  mem: {consumable: true}
  ssd: {type: boolean}
  vcs: {shared: true}
  hspice: {shared: true}
"""
# Lines 1-6; tests append their sections after it, so their first line is 7.
DECLARATIONS = RESOURCES + """hosts: [{name: "n[01-04]", slots: 8}]\n"""


def error_of(text: str, *, prefix: str = DECLARATIONS) -> str:
    """The error `load_config_text` gives for `prefix + text` (which must be invalid)."""
    with pytest.raises(ConfigError) as caught:
        load_config_text(prefix + text, "cluster.yaml")
    return str(caught.value)


def config_of(text: str) -> ClusterConfig:
    """The configuration `DECLARATIONS + text` gives (which must be valid)."""
    return load_config_text(DECLARATIONS + text, "cluster.yaml")


# --- the example --------------------------------------------------------------------


def test_example_loads_as_documented() -> None:
    config = load_config(EXAMPLE)
    assert config.cluster == "demo"
    assert config.session_interval == 10
    assert config.resources["vcs"] == ResourceDef("vcs", "numeric", consumable=True, shared=True)
    assert config.resources["ssd"] == ResourceDef("ssd", "boolean")
    assert [host.name for host in config.hosts] == [f"n{i:02d}" for i in range(1, 11)]
    assert config.hosts[0] == HostSpec("n01", 16, "X86_64", "", {"mem": 64000.0, "ssd": True})
    assert config.hosts[9] == HostSpec("n10", 16, "X86_64", "", {"mem": 64000.0})
    assert config.shared == {
        "vcs": (SharedPool("vcs", "default", 10, None),),
        "hspice": (
            SharedPool("hspice", "site", 8, tuple(f"n{i:02d}" for i in range(1, 11))),
            SharedPool("hspice", "cloud", 0, ("template:aws.*",)),
        ),
    }
    assert config.queues == (
        Queue("normal", 30, None),
        Queue("short", 50, ("n01", "n02")),
        Queue("burst", 40, ("all", "template:aws.*")),
    )
    assert config.limits == (
        Limit("per-user", slots=64, users="each"),
        Limit("normal-q", slots=200, queues=("normal",)),
    )
    assert config.catalog.idle_time == 600
    assert config.catalog.max_jobs_per_session == 10000
    assert config.catalog.templates == (
        HostTemplate("aws.c5", "aws", 16, "X86_64", "", {"mem": 30000.0}, max=100, rank=10),
        HostTemplate("aws.r5", "aws", 32, "X86_64", "", {"mem": 250000.0}, max=20, rank=20),
    )
    assert config.catalog.countables == (
        Countable("vcs", "default", max_borrow=20, idle_time=300),
        Countable("hspice", "cloud", max_borrow=16, idle_time=300),
    )
    assert config.policy == PolicyConfig(
        persistence=60, max_requests_per_round=50, min_hosts={"aws.c5": 0},
        max_lifetime=86400, backoff_initial=60, backoff_max=1800,
    )
    assert config.simulation == SimulationConfig(
        seed=1,
        providers={"aws": ProviderModel(LeadTime(mean=120), 0.0, 1000, 0.0)},
        countables={"vcs": TokenModel(grant_delay=30, refusal_rate=0.0)},
    )


def test_policy_errors_name_the_field() -> None:
    assert error_of("policy: {backoff: {initial: 60, max: 10}}\n") == (
        "cluster.yaml:7: policy.backoff.max: max must be >= initial"
    )
    assert error_of("policy: {min_hosts: {nope: 1}}\n") == (
        "cluster.yaml:7: policy.min_hosts.nope: unknown template 'nope'"
    )


def test_min_hosts_above_the_template_max_is_an_error() -> None:
    assert error_of(
        "catalog: {templates: [{name: t, provider: p, slots: 1, max: 2}]}\n"
        "policy: {min_hosts: {t: 3}}\n"
    ) == "cluster.yaml:8: policy.min_hosts.t: min_hosts 3 is above template 't' max 2"


def test_simulation_errors_name_the_field() -> None:
    assert error_of("simulation: {providers: {gcp: {lead_time: 5}}}\n") == (
        "cluster.yaml:7: simulation.providers.gcp: no template uses provider 'gcp'"
    )


def test_an_empty_mapping_gives_the_defaults() -> None:
    config = load_config_text("{}")
    assert config.cluster == "xce"
    assert config.session_interval == 10
    assert config.queues == (Queue("normal", 30),), "no queues section: the default queue"
    assert config.hosts == () and config.shared == {} and config.limits == ()
    assert config.catalog.templates == ()
    assert config.policy == PolicyConfig() and config.simulation == SimulationConfig()


def test_null_sections_count_as_absent() -> None:
    config = load_config_text("resources:\nhosts:\nshared:\nlimits:\ncatalog:\npolicy:\n")
    assert config.hosts == () and config.limits == () and config.policy == PolicyConfig()


# --- ConfigError ----------------------------------------------------------------------


def test_config_error_reads_file_line_field_message() -> None:
    err = ConfigError("cluster.yaml", 12, "queues[1].hosts[0]", "unknown host 'n99'")
    assert isinstance(err, ValueError)
    assert str(err) == "cluster.yaml:12: queues[1].hosts[0]: unknown host 'n99'"
    assert (err.file, err.line, err.field, err.message) == (
        "cluster.yaml",
        12,
        "queues[1].hosts[0]",
        "unknown host 'n99'",
    )
    copy = pickle.loads(pickle.dumps(err))
    assert str(copy) == str(err), "errors must survive crossing a process boundary"


# --- load_yaml --------------------------------------------------------------------------


def test_load_yaml_marks_lines_of_mappings_keys_and_items() -> None:
    doc = load_yaml("a: 1\nb:\n  - x\n  - {c: 2}\nd:\n  e: 3\n", "f.yaml")
    assert isinstance(doc, MarkedMap) and doc.line == 1
    assert doc.line_of("a") == 1 and doc.line_of("b") == 2 and doc.line_of("d") == 5
    items = doc["b"]
    assert isinstance(items, MarkedSeq) and items.line == 3
    assert items.line_of(0) == 3 and items.line_of(1) == 4
    inner = items[1]
    assert isinstance(inner, MarkedMap) and inner.line == 4 and inner.line_of("c") == 4
    nested = doc["d"]
    assert isinstance(nested, MarkedMap) and nested.line == 6
    assert doc == {"a": 1, "b": ["x", {"c": 2}], "d": {"e": 3}}


def test_load_yaml_syntax_error_names_line() -> None:
    with pytest.raises(ConfigError) as caught:
        load_yaml("a: 1\nb: [1, 2\nc: 3\n", "f.yaml")
    err = caught.value
    assert (err.file, err.field) == ("f.yaml", "")
    assert err.line == 3
    assert err.message.startswith("invalid YAML: ")


def test_load_yaml_duplicate_key_names_the_key() -> None:
    with pytest.raises(ConfigError) as caught:
        load_yaml("hosts:\n  - name: n01\n    slots: 4\n    slots: 8\n", "f.yaml")
    assert str(caught.value) == "f.yaml:4: hosts[0].slots: duplicate key 'slots'"


def test_load_yaml_duplicate_keys_compare_by_value() -> None:
    with pytest.raises(ConfigError) as caught:
        load_yaml("min_hosts:\n  1: a\n  0x1: b\n", "f.yaml")
    assert str(caught.value) == "f.yaml:3: min_hosts.0x1: duplicate key 1"


def test_load_yaml_merge_keys_may_be_overridden() -> None:
    doc = load_yaml("base: &b {slots: 4, type: X}\nh: {<<: *b, slots: 8}\n", "f.yaml")
    assert isinstance(doc, dict)
    assert doc["h"] == {"slots": 8, "type": "X"}


def test_load_yaml_bad_timestamp_is_a_config_error() -> None:
    with pytest.raises(ConfigError) as caught:
        load_yaml("a: 1\nb: 2024-13-45\n", "f.yaml")
    assert str(caught.value) == "f.yaml:2: : invalid YAML: '2024-13-45' is not a valid !!timestamp"


@pytest.mark.parametrize(
    "value",
    [
        "!!map x",
        "!!seq {b: 1}",
        "!!str [1]",
        "!!int x",
        "!!bool x",
        "!!timestamp x",
        "!!binary x",
        "!!python/object:os.system x",
        "!foo x",
    ],
)
def test_load_yaml_explicit_tags_on_the_wrong_value_are_config_errors(value: str) -> None:
    with pytest.raises(ConfigError) as caught:
        load_yaml(f"a: 1\nb: {value}\n", "f.yaml")
    assert caught.value.line == 2
    assert caught.value.message.startswith("invalid YAML: ")


def test_load_yaml_unhashable_key_is_a_config_error() -> None:
    with pytest.raises(ConfigError) as caught:
        load_yaml("a: 1\n? [x, y]\n: 2\n", "f.yaml")
    assert caught.value.line == 2


def test_load_yaml_deep_nesting_is_a_config_error() -> None:
    with pytest.raises(ConfigError) as caught:
        load_yaml("[" * 1000 + "]" * 1000, "f.yaml")
    assert caught.value.line == 1


def test_load_yaml_unprintable_character_is_a_config_error() -> None:
    with pytest.raises(ConfigError) as caught:
        load_yaml("a: 1\nb: \x00\nc: 3\n", "f.yaml")
    assert caught.value.line == 2


def test_load_yaml_several_documents_are_refused() -> None:
    with pytest.raises(ConfigError, match="invalid YAML"):
        load_yaml("a: 1\n---\nb: 2\n", "f.yaml")


# --- expand_hostnames -------------------------------------------------------------------


def test_expand_hostnames() -> None:
    assert expand_hostnames("n[02-10]") == [f"n{i:02d}" for i in range(2, 11)]
    assert expand_hostnames("n[8-10]") == ["n8", "n9", "n10"], "padding from the start's width"
    assert expand_hostnames("n[1-3,7]") == ["n1", "n2", "n3", "n7"]
    assert expand_hostnames("rack[1-2]n[01-02]") == ["rack1n01", "rack1n02", "rack2n01", "rack2n02"]
    assert expand_hostnames("n[5]-gpu") == ["n5-gpu"]
    assert expand_hostnames("login01") == ["login01"]


@pytest.mark.parametrize(
    ("pattern", "message"),
    [
        ("n[10-02]", "reversed range '10-02' in 'n[10-02]'"),
        ("n[]", "empty brackets in 'n[]'"),
        ("n[0-100000]", "'n[0-100000]' expands to more than 100000 names"),
        ("a[1-1000]b[1-1000]", "expands to more than 100000 names"),
        ("n[01-02", "unclosed '[' in 'n[01-02'"),
        ("n01]", "unbalanced ']' in 'n01]'"),
        ("n[a-c]", "bad range 'a-c' in 'n[a-c]'"),
        ("n[1-]", "bad range '1-' in 'n[1-]'"),
        ("n[1,,2]", "bad range '' in 'n[1,,2]'"),
        ("n[[1]]", "nested '[' in 'n[[1]]'"),
        ("", "empty host name"),
        ("n 01", "contains whitespace"),
    ],
)
def test_expand_hostnames_rejects_bad_patterns(pattern: str, message: str) -> None:
    with pytest.raises(ValueError) as caught:
        expand_hostnames(pattern)
    assert message in str(caught.value)


# --- top level ---------------------------------------------------------------------------


def test_unknown_top_level_key() -> None:
    assert error_of("queus: []\n") == "cluster.yaml:7: queus: unknown key 'queus'"


def test_document_must_be_a_mapping() -> None:
    assert error_of("- a\n- b\n", prefix="") == "cluster.yaml:1: : expected a mapping, got a list"


def test_empty_document_is_an_error() -> None:
    assert (
        error_of("# nothing\n", prefix="")
        == "cluster.yaml:1: : the configuration is empty (expected a mapping)"
    )


def test_session_interval_must_be_positive() -> None:
    assert (
        error_of("session_interval: 0\n")
        == "cluster.yaml:7: session_interval: session_interval must be > 0"
    )


def test_session_interval_must_be_a_number() -> None:
    assert (
        error_of("session_interval: 10s\n")
        == "cluster.yaml:7: session_interval: expected a number, got a string ('10s')"
    )


def test_session_interval_must_be_finite() -> None:
    assert (
        error_of("session_interval: .inf\n")
        == "cluster.yaml:7: session_interval: session_interval must be a finite number"
    )


def test_cluster_name_must_be_a_string() -> None:
    assert error_of("cluster: [a]\n") == "cluster.yaml:7: cluster: expected a string, got a list"


def test_policy_must_be_a_mapping() -> None:
    assert error_of("policy: [1]\n") == "cluster.yaml:7: policy: expected a mapping, got a list"


def test_simulation_must_be_a_mapping() -> None:
    assert (
        error_of("simulation: 3\n")
        == "cluster.yaml:7: simulation: expected a mapping, got a number (3)"
    )


def test_unknown_policy_key_is_an_error() -> None:
    assert (
        error_of("policy: &p {again: *p}\n")
        == "cluster.yaml:7: policy.again: unknown key 'again'"
    )


# --- resources ---------------------------------------------------------------------------


def test_resource_defaults_and_shared_implies_consumable() -> None:
    config = load_config_text("resources:\n  lic: {shared: true}\n  ncpu: {}\n")
    assert config.resources["lic"] == ResourceDef("lic", "numeric", consumable=True, shared=True)
    assert config.resources["ncpu"] == ResourceDef("ncpu", "numeric", consumable=False)
    assert config.shared == {"lic": (SharedPool("lic", "default", 0, None),)}, (
        "a declared shared resource without shared: entry gets an empty default pool"
    )


def test_boolean_resource_cannot_be_consumable() -> None:
    text = "resources:\n  ssd: {type: boolean,\n        consumable: true}\n"
    assert (
        error_of(text, prefix="")
        == "cluster.yaml:3: resources.ssd.consumable: a boolean resource cannot be consumable"
    )


def test_boolean_resource_cannot_be_shared() -> None:
    text = "resources:\n  ssd: {type: boolean, shared: true}\n"
    assert (
        error_of(text, prefix="")
        == "cluster.yaml:2: resources.ssd.shared: a boolean resource cannot be shared"
    )


def test_shared_resource_must_be_consumable() -> None:
    text = "resources:\n  vcs:\n    shared: true\n    consumable: false\n"
    assert (
        error_of(text, prefix="")
        == "cluster.yaml:4: resources.vcs.consumable: a shared resource must be consumable"
    )


def test_resource_type_must_be_numeric_or_boolean() -> None:
    text = "resources:\n  mem: {type: string}\n"
    assert error_of(text, prefix="") == (
        "cluster.yaml:2: resources.mem.type: type must be 'numeric' or 'boolean', "
        "got a string ('string')"
    )


@pytest.mark.parametrize("name", ["slots", "type", "model", "hname"])
def test_builtin_resources_cannot_be_declared(name: str) -> None:
    text = f"resources:\n  mem: {{}}\n  {name}: {{}}\n"
    assert error_of(text, prefix="") == (
        f"cluster.yaml:3: resources.{name}: '{name}' is a builtin resource and cannot be declared"
    )


def test_unknown_key_in_resource() -> None:
    text = "resources:\n  mem: {consumable: true, sharde: true}\n"
    assert error_of(text, prefix="") == "cluster.yaml:2: resources.mem.sharde: unknown key 'sharde'"


def test_resource_name_must_fit_requirement_strings() -> None:
    text = "resources:\n  my-lic: {}\n"
    assert error_of(text, prefix="") == (
        "cluster.yaml:2: resources.my-lic: invalid resource name 'my-lic': "
        "use letters, digits and '_', not starting with a digit"
    )


def test_resource_flag_must_be_boolean() -> None:
    text = "resources:\n  mem: {consumable: 1}\n"
    assert error_of(text, prefix="") == (
        "cluster.yaml:2: resources.mem.consumable: expected true or false, got a number (1)"
    )


# --- hosts -------------------------------------------------------------------------------


def test_hosts_expand_ranges_with_defaults() -> None:
    config = load_config_text(
        "resources: {mem: {}, ssd: {type: boolean}}\n"
        "hosts:\n"
        "  - {name: 'h[1-2]', slots: 0, model: m1, resources: {mem: 1.5, ssd: false}}\n"
    )
    assert config.hosts == (
        HostSpec("h1", 0, "X86_64", "m1", {"mem": 1.5, "ssd": False}),
        HostSpec("h2", 0, "X86_64", "m1", {"mem": 1.5, "ssd": False}),
    )


def test_host_slots_must_not_be_negative() -> None:
    assert (
        error_of("hosts:\n  - {name: a, slots: 1}\n  - {name: b, slots: -1}\n", prefix="")
        == "cluster.yaml:3: hosts[1].slots: slots must be >= 0"
    )


@pytest.mark.parametrize(
    ("value", "shown"),
    [("'4'", "a string ('4')"), ("true", "a boolean (true)"), ("4.5", "a number (4.5)")],
)
def test_host_slots_must_be_an_integer(value: str, shown: str) -> None:
    assert (
        error_of(f"hosts:\n  - name: a\n    slots: {value}\n", prefix="")
        == f"cluster.yaml:3: hosts[0].slots: expected an integer, got {shown}"
    )


def test_host_slots_are_required() -> None:
    assert (
        error_of("hosts:\n  - name: a\n    type: X86_64\n", prefix="")
        == "cluster.yaml:2: hosts[0].slots: missing required key 'slots'"
    )


def test_host_name_is_required() -> None:
    assert (
        error_of("hosts:\n  - {slots: 4}\n", prefix="")
        == "cluster.yaml:2: hosts[0].name: missing required key 'name'"
    )


def test_host_unknown_resource() -> None:
    assert (
        error_of("hosts:\n  - {name: a, slots: 1, resources: {foo: 1}}\n", prefix=RESOURCES)
        == "cluster.yaml:7: hosts[0].resources.foo: unknown resource 'foo'"
    )


def test_shared_resource_cannot_be_a_host_resource() -> None:
    assert (
        error_of(
            "hosts:\n  - name: a\n    slots: 1\n    resources:\n      vcs: 2\n", prefix=RESOURCES
        )
        == "cluster.yaml:10: hosts[0].resources.vcs: "
        "shared resource 'vcs' cannot be a host resource"
    )


def test_boolean_host_resource_takes_true_or_false() -> None:
    assert error_of("hosts:\n  - {name: a, slots: 1, resources: {ssd: 1}}\n", prefix=RESOURCES) == (
        "cluster.yaml:7: hosts[0].resources.ssd: expected true or false, got a number (1)"
    )


def test_numeric_host_resource_must_not_be_negative() -> None:
    assert error_of(
        "hosts:\n  - {name: a, slots: 1, resources: {mem: -5}}\n", prefix=RESOURCES
    ) == ("cluster.yaml:7: hosts[0].resources.mem: mem must be >= 0")


def test_numeric_host_resource_must_be_a_number() -> None:
    assert error_of(
        "hosts:\n  - {name: a, slots: 1, resources: {mem: true}}\n", prefix=RESOURCES
    ) == ("cluster.yaml:7: hosts[0].resources.mem: expected a number, got a boolean (true)")


def test_duplicate_host_across_ranges_is_reported_at_the_later_entry() -> None:
    text = "hosts:\n  - {name: 'n[01-04]', slots: 1}\n  - name: 'n[03-05]'\n    slots: 1\n"
    assert error_of(text, prefix="") == "cluster.yaml:3: hosts[1].name: duplicate host 'n03'"


def test_bad_host_range_is_reported_at_the_name() -> None:
    assert error_of("hosts:\n  - {name: 'n[5-1]', slots: 1}\n", prefix="") == (
        "cluster.yaml:2: hosts[0].name: reversed range '5-1' in 'n[5-1]'"
    )


def test_host_cannot_be_named_all() -> None:
    assert error_of("hosts:\n  - {name: all, slots: 1}\n", prefix="") == (
        "cluster.yaml:2: hosts[0].name: 'all' is reserved in host lists and cannot name a host"
    )


def test_unknown_key_in_host() -> None:
    assert error_of("hosts:\n  - {name: a, slot: 1}\n", prefix="") == (
        "cluster.yaml:2: hosts[0].slot: unknown key 'slot'"
    )


def test_hosts_must_be_a_list_of_mappings() -> None:
    assert error_of("hosts: {name: a}\n", prefix="") == (
        "cluster.yaml:1: hosts: expected a list, got a mapping"
    )
    assert error_of("hosts:\n  - a\n", prefix="") == (
        "cluster.yaml:2: hosts[0]: expected a mapping, got a string ('a')"
    )


# --- shared ------------------------------------------------------------------------------


def test_shared_pools() -> None:
    config = config_of(
        "shared:\n"
        "  vcs: {total: 3.5}\n"
        "  hspice:\n"
        "    - {pool: a, total: 1, hosts: ['n[01-02]', n02, all]}\n"
        "    - {pool: b, total: 2}\n"
    )
    assert config.shared == {
        "vcs": (SharedPool("vcs", "default", 3.5, None),),
        "hspice": (
            SharedPool("hspice", "a", 1, ("n01", "n02", "all")),
            SharedPool("hspice", "b", 2, None),
        ),
    }


def test_shared_key_not_declared_declares_a_shared_consumable() -> None:
    # FORMATS.md's example lists `hspice` under shared: and countables: only.
    config = config_of(
        "shared:\n  lic:\n    - {pool: site, total: 2}\n"
        "catalog:\n  countables:\n    - {resource: lic, pool: site, max_borrow: 3}\n"
    )
    assert config.resources["lic"] == ResourceDef("lic", "numeric", consumable=True, shared=True)
    assert config.shared["lic"] == (SharedPool("lic", "site", 2, None),)
    assert config.catalog.countables[0].resource == "lic"


def test_shared_key_must_be_a_resource_name() -> None:
    assert error_of("shared:\n  9lic: {total: 1}\n") == (
        "cluster.yaml:8: shared.9lic: invalid resource name '9lic': use letters, digits "
        "and '_', not starting with a digit"
    )
    assert error_of("shared:\n  slots: {total: 1}\n") == (
        "cluster.yaml:8: shared.slots: 'slots' is a builtin resource and cannot be declared"
    )


def test_shared_key_must_be_a_shared_resource() -> None:
    assert error_of("shared:\n  mem: {total: 1}\n") == (
        "cluster.yaml:8: shared.mem: resource 'mem' is not shared"
    )


def test_pool_names_are_unique_per_resource() -> None:
    text = "shared:\n  hspice:\n    - {pool: a, total: 1}\n    - {pool: a, total: 2}\n"
    assert error_of(text) == "cluster.yaml:10: shared.hspice[1].pool: duplicate pool 'a'"


def test_pool_total_must_not_be_negative() -> None:
    assert error_of("shared:\n  vcs: {total: -1}\n") == (
        "cluster.yaml:8: shared.vcs.total: total must be >= 0"
    )


def test_pool_total_is_required() -> None:
    assert error_of("shared:\n  hspice:\n    - {pool: a}\n") == (
        "cluster.yaml:9: shared.hspice[0].total: missing required key 'total'"
    )


def test_pool_host_must_exist() -> None:
    text = (
        "shared:\n  hspice:\n    - {pool: a, total: 1}\n    - {pool: b, total: 1, hosts: [n99]}\n"
    )
    assert error_of(text) == "cluster.yaml:10: shared.hspice[1].hosts[0]: unknown host 'n99'"


def test_pool_shorthand_takes_only_total() -> None:
    assert error_of("shared:\n  vcs: {total: 1, hosts: [n01]}\n") == (
        "cluster.yaml:8: shared.vcs.hosts: unknown key 'hosts'"
    )


def test_pool_list_must_not_be_empty() -> None:
    assert error_of("shared:\n  vcs: []\n") == "cluster.yaml:8: shared.vcs: needs at least one pool"


def test_pool_entry_must_be_a_mapping_or_list() -> None:
    assert error_of("shared:\n  vcs: 10\n") == (
        "cluster.yaml:8: shared.vcs: expected a mapping {total: N} or a list of pools, "
        "got a number (10)"
    )


# --- queues ------------------------------------------------------------------------------


def test_queue_hosts_are_expanded_and_patterns_kept() -> None:
    config = config_of(
        "queues:\n"
        "  - {name: a, hosts: ['n[01-03]', 'template:aws.*', all]}\n"
        "  - {name: b, requeue_on_host_loss: false}\n"
    )
    assert config.queues == (
        Queue("a", 0, ("n01", "n02", "n03", "template:aws.*", "all")),
        Queue("b", 0, None, requeue_on_host_loss=False),
    )


def test_queue_host_must_exist() -> None:
    text = "queues:\n  - {name: a}\n  - name: b\n    hosts:\n      - n99\n"
    assert error_of(text) == "cluster.yaml:11: queues[1].hosts[0]: unknown host 'n99'"


def test_queue_host_range_must_exist_entirely() -> None:
    assert error_of("queues:\n  - {name: a, hosts: ['n[03-05]']}\n") == (
        "cluster.yaml:8: queues[0].hosts[0]: unknown host 'n05'"
    )


def test_queue_names_are_unique() -> None:
    assert error_of("queues:\n  - {name: a}\n  - {name: a}\n") == (
        "cluster.yaml:9: queues[1].name: duplicate queue 'a'"
    )


def test_queue_priority_must_be_an_integer() -> None:
    assert error_of("queues:\n  - {name: a, priority: high}\n") == (
        "cluster.yaml:8: queues[0].priority: expected an integer, got a string ('high')"
    )


def test_empty_queue_list_is_an_error() -> None:
    expected = (
        "cluster.yaml:7: queues: needs at least one queue (omit queues: for the default queue)"
    )
    assert error_of("queues: []\n") == expected
    assert error_of("queues:\n") == expected, "a null queues: is an empty list too"


def test_queue_hosts_must_not_be_empty() -> None:
    assert error_of("queues:\n  - {name: a, hosts: []}\n") == (
        "cluster.yaml:8: queues[0].hosts: must not be empty (omit hosts for every host)"
    )


def test_template_pattern_needs_a_glob() -> None:
    assert error_of("queues:\n  - {name: a, hosts: ['template:']}\n") == (
        "cluster.yaml:8: queues[0].hosts[0]: 'template:' needs a template name pattern after ':'"
    )


# --- run limits, backfill and reservations (ARCHITECTURE.md 2a) ----------------------------


def test_run_limit_keys_are_read_with_their_defaults() -> None:
    config = config_of(
        "reserve_depth: 2\n"
        "queues:\n"
        "  - {name: a}\n"
        "  - {name: b, backfill: true, run_limit: 3600, max_run_limit: 86400}\n"
        "  - {name: c, backfill: false, max_run_limit: 0.5}\n"
        "simulation: {enforce_run_limits: false}\n"
    )
    assert config.reserve_depth == 2
    assert config.queues == (
        Queue("a", 0, None),
        Queue("b", 0, None, backfill=True, run_limit=3600.0, max_run_limit=86400.0),
        Queue("c", 0, None, max_run_limit=0.5),
    )
    assert config.simulation == SimulationConfig(enforce_run_limits=False)


def test_run_limit_defaults() -> None:
    config = config_of("queues:\n  - {name: a}\nsimulation: {seed: 3}\n")
    assert config.reserve_depth == 0, "LSF's default: no reservation"
    queue = config.queues[0]
    assert (queue.backfill, queue.run_limit, queue.max_run_limit) == (False, None, None)
    assert config.simulation.enforce_run_limits is True
    assert load_config_text("{}").reserve_depth == 0


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("reserve_depth: -1\n", "cluster.yaml:7: reserve_depth: reserve_depth must be >= 0"),
        (
            "reserve_depth: x\n",
            "cluster.yaml:7: reserve_depth: expected an integer, got a string ('x')",
        ),
        (
            "reserve_depth: 1.5\n",
            "cluster.yaml:7: reserve_depth: expected an integer, got a number (1.5)",
        ),
        (
            "reserve_depth: true\n",
            "cluster.yaml:7: reserve_depth: expected an integer, got a boolean (true)",
        ),
    ],
)
def test_reserve_depth_must_be_an_integer_of_at_least_zero(text: str, expected: str) -> None:
    assert error_of(text) == expected


@pytest.mark.parametrize(
    ("entry", "expected"),
    [
        (
            "{name: b, backfill: 'yes'}",
            "queues[1].backfill: expected true or false, got a string ('yes')",
        ),
        ("{name: b, backfill: 1}", "queues[1].backfill: expected true or false, got a number (1)"),
        ("{name: b, run_limit: -5}", "queues[1].run_limit: run_limit must be >= 0"),
        (
            "{name: b, run_limit: abc}",
            "queues[1].run_limit: expected a number, got a string ('abc')",
        ),
        (
            "{name: b, run_limit: .inf}",
            "queues[1].run_limit: run_limit must be a finite number",
        ),
        ("{name: b, max_run_limit: -1}", "queues[1].max_run_limit: max_run_limit must be >= 0"),
        (
            "{name: b, max_run_limit: 1h}",
            "queues[1].max_run_limit: expected a number, got a string ('1h')",
        ),
        (
            "{name: b, run_limit: 7200, max_run_limit: 3600}",
            "queues[1].run_limit: run_limit 7200 is above max_run_limit 3600",
        ),
    ],
)
def test_bad_queue_run_limit_keys_name_file_line_and_field(entry: str, expected: str) -> None:
    assert error_of(f"queues:\n  - {{name: a}}\n  - {entry}\n") == f"cluster.yaml:9: {expected}"


def test_queue_run_limit_error_names_the_line_of_the_value() -> None:
    text = "queues:\n  - name: a\n    max_run_limit: 60\n    run_limit: 61.5\n"
    assert error_of(text) == (
        "cluster.yaml:10: queues[0].run_limit: run_limit 61.5 is above max_run_limit 60"
    )


def test_run_limit_equal_to_the_maximum_is_accepted() -> None:
    queue = config_of("queues:\n  - {name: a, run_limit: 60, max_run_limit: 60}\n").queues[0]
    assert (queue.run_limit, queue.max_run_limit) == (60.0, 60.0)


def test_enforce_run_limits_must_be_a_boolean() -> None:
    assert error_of("simulation:\n  enforce_run_limits: 'no'\n") == (
        "cluster.yaml:8: simulation.enforce_run_limits: expected true or false, "
        "got a string ('no')"
    )


# --- limits ------------------------------------------------------------------------------


def test_limits() -> None:
    config = config_of(
        "queues: [{name: a}, {name: b}]\n"
        "limits:\n"
        "  - {name: l1, users: [alice, bob], queues: each, jobs: 3}\n"
        "  - {name: l2, slots: 0, queues: [b]}\n"
    )
    assert config.limits == (
        Limit("l1", jobs=3, users=("alice", "bob"), queues="each"),
        Limit("l2", slots=0, queues=("b",)),
    )


def test_limit_needs_slots_or_jobs() -> None:
    assert error_of("limits:\n  - {name: l, users: each}\n") == (
        "cluster.yaml:8: limits[0]: a limit needs slots or jobs"
    )


def test_limit_names_are_unique() -> None:
    assert error_of("limits:\n  - {name: l, slots: 1}\n  - {name: l, jobs: 1}\n") == (
        "cluster.yaml:9: limits[1].name: duplicate limit 'l'"
    )


def test_limit_slots_must_not_be_negative() -> None:
    assert error_of("limits:\n  - {name: l, slots: -2}\n") == (
        "cluster.yaml:8: limits[0].slots: slots must be >= 0"
    )


def test_limit_jobs_must_be_an_integer() -> None:
    assert error_of("limits:\n  - {name: l, jobs: 1.5}\n") == (
        "cluster.yaml:8: limits[0].jobs: expected an integer, got a number (1.5)"
    )


def test_limit_users_is_each_or_a_list() -> None:
    assert error_of("limits:\n  - {name: l, slots: 1, users: alice}\n") == (
        "cluster.yaml:8: limits[0].users: expected 'each' or a list of user names, "
        "got a string ('alice')"
    )


def test_limit_queue_must_exist() -> None:
    assert error_of("limits:\n  - {name: l, slots: 1, queues: [normal, x]}\n") == (
        "cluster.yaml:8: limits[0].queues[1]: unknown queue 'x'"
    )


# --- catalog -----------------------------------------------------------------------------


def test_catalog_templates_keep_config_order() -> None:
    config = config_of(
        "catalog:\n"
        "  idle_time: 0\n"
        "  templates:\n"
        "    - {name: z, provider: p, slots: 1, rank: 5, idle_time: 30, model: m}\n"
        "    - {name: a, provider: p, slots: 2, rank: -1, resources: {ssd: true}}\n"
    )
    assert config.catalog.idle_time == 0
    assert config.catalog.templates == (
        HostTemplate("z", "p", 1, "X86_64", "m", {}, max=0, rank=5, idle_time=30),
        HostTemplate("a", "p", 2, "X86_64", "", {"ssd": True}, max=0, rank=-1),
    )


def test_template_provider_is_required() -> None:
    assert error_of("catalog:\n  templates:\n    - {name: t, slots: 4}\n") == (
        "cluster.yaml:9: catalog.templates[0].provider: missing required key 'provider'"
    )


def test_template_name_is_required() -> None:
    assert error_of("catalog:\n  templates:\n    - {provider: p, slots: 4}\n") == (
        "cluster.yaml:9: catalog.templates[0].name: missing required key 'name'"
    )


def test_template_names_are_unique() -> None:
    text = (
        "catalog:\n  templates:\n"
        "    - {name: t, provider: p, slots: 4}\n    - {name: t, provider: q, slots: 4}\n"
    )
    assert error_of(text) == "cluster.yaml:10: catalog.templates[1].name: duplicate template 't'"


def test_template_slots_must_be_at_least_one() -> None:
    assert error_of("catalog:\n  templates:\n    - {name: t, provider: p, slots: 0}\n") == (
        "cluster.yaml:9: catalog.templates[0].slots: slots must be >= 1"
    )


def test_template_max_must_not_be_negative() -> None:
    text = "catalog:\n  templates:\n    - {name: t, provider: p, slots: 1, max: -1}\n"
    assert error_of(text) == "cluster.yaml:9: catalog.templates[0].max: max must be >= 0"


def test_template_idle_time_must_not_be_negative() -> None:
    text = "catalog:\n  templates:\n    - {name: t, provider: p, slots: 1, idle_time: -1}\n"
    assert error_of(text) == (
        "cluster.yaml:9: catalog.templates[0].idle_time: idle_time must be >= 0"
    )


def test_template_resources_are_checked_like_host_resources() -> None:
    text = "catalog:\n  templates:\n    - {name: t, provider: p, slots: 1, resources: {vcs: 1}}\n"
    assert error_of(text) == (
        "cluster.yaml:9: catalog.templates[0].resources.vcs: "
        "shared resource 'vcs' cannot be a host resource"
    )


def test_template_price_and_catalog_choose_are_read_with_their_defaults() -> None:
    config = config_of(
        "catalog:\n"
        "  choose: least-waste\n"
        "  templates:\n"
        "    - {name: a, provider: p, slots: 4, price: 0.68}\n"
        "    - {name: b, provider: p, slots: 4, price: 2}\n"
        "    - {name: c, provider: p, slots: 4}\n"
    )
    assert config.catalog.choose == "least-waste"
    assert [t.price for t in config.catalog.templates] == [0.68, 2.0, 0.0], "default: 0"
    assert config_of("catalog:\n  idle_time: 60\n").catalog.choose == "rank", "default: rank"
    assert config_of("catalog:\n  choose: cost\n").catalog.choose == "cost"


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("-0.5", "price must be >= 0"),
        ("-1", "price must be >= 0"),
        ("'$1'", "expected a number, got a string ('$1')"),
        ("true", "expected a number, got a boolean (true)"),
        (".inf", "price must be a finite number"),
    ],
)
def test_bad_template_price_names_file_line_and_field(value: str, message: str) -> None:
    text = (
        "catalog:\n  templates:\n    - {name: a, provider: p, slots: 1}\n"
        f"    - {{name: t, provider: p, slots: 1, price: {value}}}\n"
    )
    assert error_of(text) == f"cluster.yaml:10: catalog.templates[1].price: {message}"


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("cheapest", "expected one of rank, cost, least-waste, got 'cheapest'"),
        ("Cost", "expected one of rank, cost, least-waste, got 'Cost'"),
        ("least_waste", "expected one of rank, cost, least-waste, got 'least_waste'"),
        ("1", "expected a string, got a number (1)"),
    ],
)
def test_bad_catalog_choose_names_file_line_and_field(value: str, message: str) -> None:
    assert error_of(f"catalog:\n  idle_time: 60\n  choose: {value}\n") == (
        f"cluster.yaml:9: catalog.choose: {message}"
    )


def test_catalog_idle_time_must_not_be_negative() -> None:
    assert error_of("catalog:\n  idle_time: -5\n") == (
        "cluster.yaml:8: catalog.idle_time: idle_time must be >= 0"
    )


def test_catalog_max_jobs_per_session_must_be_an_integer() -> None:
    assert error_of("catalog:\n  max_jobs_per_session: many\n") == (
        "cluster.yaml:8: catalog.max_jobs_per_session: expected an integer, got a string ('many')"
    )


def test_unknown_key_in_catalog() -> None:
    assert error_of("catalog:\n  template: []\n") == (
        "cluster.yaml:8: catalog.template: unknown key 'template'"
    )


def test_countable_pool_defaults_to_the_only_pool() -> None:
    config = config_of("catalog:\n  countables:\n    - {resource: vcs}\n")
    assert config.catalog.countables == (Countable("vcs", "default", 0, 300),)


def test_countable_resource_must_be_declared() -> None:
    assert error_of("catalog:\n  countables:\n    - {resource: lic}\n") == (
        "cluster.yaml:9: catalog.countables[0].resource: unknown resource 'lic'"
    )


def test_countable_resource_must_be_shared() -> None:
    assert error_of("catalog:\n  countables:\n    - {resource: mem}\n") == (
        "cluster.yaml:9: catalog.countables[0].resource: resource 'mem' is not shared"
    )


def test_countable_must_name_a_pool_when_there_are_several() -> None:
    text = (
        "shared:\n  hspice: [{pool: a, total: 1}, {pool: b, total: 1}]\n"
        "catalog:\n  countables:\n    - {resource: hspice, max_borrow: 2}\n"
    )
    assert error_of(text) == (
        "cluster.yaml:11: catalog.countables[0].pool: resource 'hspice' has several pools: name one"
    )


def test_countable_pool_must_exist() -> None:
    text = (
        "shared:\n  hspice: [{pool: a, total: 1}, {pool: b, total: 1}]\n"
        "catalog:\n  countables:\n    - {resource: hspice, pool: c}\n"
    )
    assert error_of(text) == (
        "cluster.yaml:11: catalog.countables[0].pool: "
        "unknown pool 'c' of resource 'hspice' (pools: a, b)"
    )


def test_countable_max_borrow_must_not_be_negative() -> None:
    assert error_of("catalog:\n  countables:\n    - {resource: vcs, max_borrow: -1}\n") == (
        "cluster.yaml:9: catalog.countables[0].max_borrow: max_borrow must be >= 0"
    )


def test_countable_idle_time_must_not_be_negative() -> None:
    assert error_of("catalog:\n  countables:\n    - {resource: vcs, idle_time: -1}\n") == (
        "cluster.yaml:9: catalog.countables[0].idle_time: idle_time must be >= 0"
    )


def test_countables_are_unique_per_pool() -> None:
    text = "catalog:\n  countables:\n    - {resource: vcs}\n    - {resource: vcs, pool: default}\n"
    assert error_of(text) == (
        "cluster.yaml:10: catalog.countables[1].resource: duplicate countable 'vcs/default'"
    )


# --- build_config, load_config ------------------------------------------------------------


def test_build_config_prefixes_fields_of_an_inline_cluster() -> None:
    scenario = load_yaml(
        "now: 1000\n"
        "cluster:\n"
        "  hosts: [{name: n01, slots: 1}, {name: n02, slots: 1}]\n"
        "  queues:\n"
        "    - {name: a}\n"
        "    - {name: b, hosts: [n01, n99]}\n",
        "scenario.yaml",
    )
    assert isinstance(scenario, dict)
    with pytest.raises(ConfigError) as caught:
        build_config(scenario["cluster"], "scenario.yaml", field_prefix="cluster")
    assert str(caught.value) == "scenario.yaml:6: cluster.queues[1].hosts[1]: unknown host 'n99'"


def test_build_config_reports_the_given_line_for_a_bad_inline_cluster() -> None:
    scenario = load_yaml("now: 1\ncluster: demo\n", "scenario.yaml")
    assert isinstance(scenario, MarkedMap)
    with pytest.raises(ConfigError) as caught:
        build_config(
            scenario["cluster"], "scenario.yaml", "cluster", line=scenario.value_line_of("cluster")
        )
    assert (
        str(caught.value) == "scenario.yaml:2: cluster: expected a mapping, got a string ('demo')"
    )


def test_build_config_accepts_plain_data_without_lines() -> None:
    config = build_config({"hosts": [{"name": "n[1-2]", "slots": 2}]}, "api")
    assert [host.name for host in config.hosts] == ["n1", "n2"]
    with pytest.raises(ConfigError) as caught:
        build_config({"hosts": [{"name": "a", "slots": -1}]}, "api", "cluster")
    assert str(caught.value) == "api:1: cluster.hosts[0].slots: slots must be >= 0"


def test_load_config_unreadable_file(tmp_path: Path) -> None:
    missing = tmp_path / "nope.yaml"
    with pytest.raises(ConfigError) as caught:
        load_config(missing)
    err = caught.value
    assert (err.file, err.line, err.field) == (str(missing), 0, "")
    assert err.message.startswith("cannot read: ")


def test_load_config_names_the_file_in_errors(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text("cluster: x\nfoo: 1\n")
    with pytest.raises(ConfigError) as caught:
        load_config(str(path))
    assert str(caught.value) == f"{path}:2: foo: unknown key 'foo'"


def test_load_config_text_default_filename() -> None:
    with pytest.raises(ConfigError) as caught:
        load_config_text("foo: 1\n")
    assert str(caught.value) == "<string>:1: foo: unknown key 'foo'"


def test_first_problem_is_reported() -> None:
    text = "hosts:\n  - {name: a, slots: -1}\n  - {name: b, slots: -2}\n"
    assert error_of(text, prefix="") == "cluster.yaml:2: hosts[0].slots: slots must be >= 0"
