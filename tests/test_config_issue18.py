"""Loading the configuration keys of issue 18: a template's `expected_lead_time`, and the
policy knobs `keep_idle_while_demand`, `scale_down_delay_after_add` and
`cancel_surplus`.

Every error test states the exact `file:line: field: message` a user would see (the
same form as the other fields' errors, tests/test_config.py).
"""

from __future__ import annotations

import pytest

from xce.config import ConfigError, load_config_text
from xce.model.cluster import ClusterConfig, HostTemplate
from xce.model.policy import PolicyConfig

# Lines 1-2; each test's own lines follow, the first being line 3.
HEAD = "cluster: demo\nsession_interval: 10\n"
# Lines 3-5: the template under test is on line 5.
TEMPLATE = "catalog:\n  templates:\n    - {{name: t, provider: p, slots: 4, max: 2, {key}}}\n"


def error_of(text: str) -> str:
    """The error `load_config_text` gives for `HEAD + text` (which must be invalid)."""
    with pytest.raises(ConfigError) as caught:
        load_config_text(HEAD + text, "cluster.yaml")
    return str(caught.value)


def config_of(text: str) -> ClusterConfig:
    return load_config_text(HEAD + text, "cluster.yaml")


# --- catalog.templates[].expected_lead_time ------------------------------------------


def test_expected_lead_time_is_read_and_defaults_to_none() -> None:
    config = config_of(TEMPLATE.format(key="expected_lead_time: 180"))
    assert config.catalog.templates == (
        HostTemplate("t", "p", 4, max=2, expected_lead_time=180.0),
    )
    unset = config_of(TEMPLATE.format(key="rank: 1"))
    assert unset.catalog.templates[0].expected_lead_time is None, "unset: the runtime default"


def test_expected_lead_time_zero_and_fractions_are_accepted() -> None:
    assert config_of(TEMPLATE.format(key="expected_lead_time: 0")).catalog.templates[
        0
    ].expected_lead_time == 0.0
    assert config_of(TEMPLATE.format(key="expected_lead_time: 90.5")).catalog.templates[
        0
    ].expected_lead_time == 90.5


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("-1", "expected_lead_time must be >= 0"),
        ("-0.5", "expected_lead_time must be >= 0"),
        ("3m", "expected a number, got a string ('3m')"),
        ("'180'", "expected a number, got a string ('180')"),
        ("true", "expected a number, got a boolean (true)"),
        ("null", "expected a number, got null"),
        ("[180]", "expected a number, got a list"),
        (".inf", "expected_lead_time must be a finite number"),
    ],
)
def test_bad_expected_lead_time_names_file_line_and_field(value: str, message: str) -> None:
    assert error_of(TEMPLATE.format(key=f"expected_lead_time: {value}")) == (
        f"cluster.yaml:5: catalog.templates[0].expected_lead_time: {message}"
    )


def test_bad_expected_lead_time_of_a_later_template_names_its_index_and_line() -> None:
    text = (
        "catalog:\n"
        "  templates:\n"
        "    - {name: a, provider: p, slots: 1, expected_lead_time: 60}\n"
        "    - name: b\n"
        "      provider: p\n"
        "      slots: 1\n"
        "      expected_lead_time: -30\n"
    )
    assert error_of(text) == (
        "cluster.yaml:9: catalog.templates[1].expected_lead_time: "
        "expected_lead_time must be >= 0"
    )


# --- policy.keep_idle_while_demand ----------------------------------------------------


def test_keep_idle_while_demand_defaults_to_true_and_reads_false() -> None:
    assert config_of("policy: {persistence: 0}\n").policy.keep_idle_while_demand is True
    assert config_of("policy:\n  keep_idle_while_demand: false\n").policy == PolicyConfig(
        keep_idle_while_demand=False
    )
    assert config_of("policy:\n  keep_idle_while_demand: true\n").policy == PolicyConfig()


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        ("1", "a number (1)"),
        ("0", "a number (0)"),
        ("'yes'", "a string ('yes')"),
        ("'true'", "a string ('true')"),
        ("null", "null"),
        ("{}", "a mapping"),
    ],
)
def test_bad_keep_idle_while_demand_names_file_line_and_field(value: str, shown: str) -> None:
    assert error_of(f"policy:\n  persistence: 0\n  keep_idle_while_demand: {value}\n") == (
        f"cluster.yaml:5: policy.keep_idle_while_demand: expected true or false, got {shown}"
    )


# --- policy.scale_down_delay_after_add -----------------------------------------------


def test_scale_down_delay_after_add_defaults_to_zero_and_reads_seconds() -> None:
    assert config_of("policy: {persistence: 0}\n").policy.scale_down_delay_after_add == 0
    policy = config_of("policy:\n  scale_down_delay_after_add: 600\n").policy
    assert policy == PolicyConfig(scale_down_delay_after_add=600.0)
    assert config_of("policy: {scale_down_delay_after_add: 0.5}\n").policy == PolicyConfig(
        scale_down_delay_after_add=0.5
    )


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("-1", "scale_down_delay_after_add must be >= 0"),
        ("-0.001", "scale_down_delay_after_add must be >= 0"),
        ("10m", "expected a number, got a string ('10m')"),
        ("false", "expected a number, got a boolean (false)"),
        ("null", "expected a number, got null"),
        (".nan", "scale_down_delay_after_add must be a finite number"),
    ],
)
def test_bad_scale_down_delay_after_add_names_file_line_and_field(
    value: str, message: str
) -> None:
    assert error_of(f"policy:\n  persistence: 0\n  scale_down_delay_after_add: {value}\n") == (
        f"cluster.yaml:5: policy.scale_down_delay_after_add: {message}"
    )


# --- policy.cancel_surplus ------------------------------------------------------------


def test_cancel_surplus_defaults_to_true_and_reads_false() -> None:
    assert config_of("policy: {persistence: 0}\n").policy.cancel_surplus is True
    assert config_of("policy:\n  cancel_surplus: false\n").policy == PolicyConfig(
        cancel_surplus=False
    )
    assert config_of("policy:\n  cancel_surplus: true\n").policy == PolicyConfig()


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        ('"yes"', "a string ('yes')"),
        ("'no'", "a string ('no')"),
        ("'false'", "a string ('false')"),
        ("1", "a number (1)"),
        ("0", "a number (0)"),
        ("null", "null"),
        ("[true]", "a list"),
    ],
)
def test_bad_cancel_surplus_names_file_line_and_field(value: str, shown: str) -> None:
    message = error_of(f"policy:\n  persistence: 0\n  cancel_surplus: {value}\n")
    assert message == (
        f"cluster.yaml:5: policy.cancel_surplus: expected true or false, got {shown}"
    )
    assert "\n" not in message, "one error, on one line"


def test_a_bad_cancel_surplus_beside_other_knobs_is_the_one_error() -> None:
    text = (
        "policy:\n"
        "  persistence: 30\n"
        "  keep_idle_while_demand: false\n"
        "  scale_down_delay_after_add: 600\n"
        '  cancel_surplus: "yes"\n'
    )
    assert error_of(text) == (
        "cluster.yaml:7: policy.cancel_surplus: expected true or false, got a string ('yes')"
    )


def test_a_misspelt_knob_is_an_unknown_key() -> None:
    assert error_of("policy:\n  scale_down_delay: 60\n") == (
        "cluster.yaml:4: policy.scale_down_delay: unknown key 'scale_down_delay'"
    )


# --- a good configuration ------------------------------------------------------------

GOOD = """\
catalog:
  idle_time: 300
  templates:
    - {name: aws.c5, provider: aws, slots: 16, max: 100, rank: 10, expected_lead_time: 180}
    - {name: aws.r5, provider: aws, slots: 32, max: 20, rank: 20}
policy:
  persistence: 30
  min_hosts: {aws.c5: 1}
  keep_idle_while_demand: false
  scale_down_delay_after_add: 600
  cancel_surplus: false
simulation:
  providers:
    aws: {lead_time: 120}
"""


def test_a_good_configuration_round_trips() -> None:
    config = config_of(GOOD)
    assert config.catalog.templates == (
        HostTemplate("aws.c5", "aws", 16, max=100, rank=10, expected_lead_time=180.0),
        HostTemplate("aws.r5", "aws", 32, max=20, rank=20),
    )
    assert config.policy == PolicyConfig(
        persistence=30, min_hosts={"aws.c5": 1}, keep_idle_while_demand=False,
        scale_down_delay_after_add=600.0, cancel_surplus=False,
    )
    # The loaded values come back as loaded: the model written out and read again.
    again = config_of(
        "catalog:\n"
        "  idle_time: 300\n"
        "  templates:\n"
        + "".join(
            f"    - {{name: {t.name}, provider: {t.provider}, slots: {t.slots}, max: {t.max}, "
            f"rank: {t.rank}"
            + (f", expected_lead_time: {t.expected_lead_time}" if t.expected_lead_time
               is not None else "")
            + "}\n"
            for t in config.catalog.templates
        )
        + "policy:\n"
        f"  persistence: {config.policy.persistence}\n"
        "  min_hosts: {aws.c5: 1}\n"
        f"  keep_idle_while_demand: {str(config.policy.keep_idle_while_demand).lower()}\n"
        f"  scale_down_delay_after_add: {config.policy.scale_down_delay_after_add}\n"
        f"  cancel_surplus: {str(config.policy.cancel_surplus).lower()}\n"
        "simulation:\n  providers:\n    aws: {lead_time: 120}\n"
    )
    assert again == config
