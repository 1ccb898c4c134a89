"""parse_service_config: grpc's service-config JSON, its validation and lookups."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, strategies as st

from trio_h2t.grpc import (
    MethodConfig,
    RetryPolicy,
    RetryThrottling,
    ServiceConfig,
    StatusCode,
    parse_service_config,
)

#: The retry example of gRFC A6 (values as there).
A6_EXAMPLE = """
{
  "loadBalancingConfig": [{"round_robin": {}}],
  "methodConfig": [
    {
      "name": [{"service": "grpc.testing.TestService"}],
      "timeout": "1.5s",
      "retryPolicy": {
        "maxAttempts": 4,
        "initialBackoff": "0.1s",
        "maxBackoff": "1s",
        "backoffMultiplier": 2,
        "retryableStatusCodes": ["UNAVAILABLE"]
      }
    }
  ],
  "retryThrottling": {"maxTokens": 10, "tokenRatio": 0.1}
}
"""


def test_none_gives_defaults() -> None:
    """None is the empty config: pick_first, no throttling, empty method configs."""
    config = parse_service_config(None)
    assert config == ServiceConfig()
    assert config.lb_policy == "pick_first"
    assert config.method_config("/a.B/C") == MethodConfig()


def test_a6_example() -> None:
    """The gRFC A6 example parses into the documented values."""
    config = parse_service_config(A6_EXAMPLE)
    assert config.lb_policy == "round_robin"
    assert config.retry_throttling == RetryThrottling(max_tokens=10.0, token_ratio=0.1)
    method = config.method_config("/grpc.testing.TestService/UnaryCall")
    assert method.timeout == 1.5
    assert method.retry_policy == RetryPolicy(
        max_attempts=4,
        initial_backoff=0.1,
        max_backoff=1.0,
        backoff_multiplier=2.0,
        retryable_status_codes=frozenset({StatusCode.UNAVAILABLE}),
    )
    assert config.method_config("/other.Service/UnaryCall") == MethodConfig()


def test_mapping_and_json_give_the_same() -> None:
    """A decoded mapping parses exactly as its JSON text does."""
    assert parse_service_config(json.loads(A6_EXAMPLE)) == parse_service_config(A6_EXAMPLE)


def test_name_lookup_order() -> None:
    """Exact method first, then the service's entry, then the default entry."""
    config = parse_service_config(
        {
            "methodConfig": [
                {"name": [{}], "timeout": "3s"},
                {"name": [{"service": "s.S"}], "timeout": "2s"},
                {"name": [{"service": "s.S", "method": "M"}], "timeout": "1s"},
                {"name": [{"service": "s.T", "method": ""}], "waitForReady": True},
            ]
        }
    )
    assert config.method_config("/s.S/M").timeout == 1.0
    assert config.method_config("/s.S/N").timeout == 2.0
    assert config.method_config("/x.Y/M").timeout == 3.0
    assert config.method_config("/s.T/Any") == MethodConfig(wait_for_ready=True)


def test_one_entry_several_names() -> None:
    """An entry's every name maps to that same entry."""
    config = parse_service_config(
        {
            "methodConfig": [
                {
                    "name": [{"service": "a.A", "method": "X"}, {"service": "b.B"}],
                    "maxRequestMessageBytes": 1024,
                    "maxResponseMessageBytes": "2048",
                }
            ]
        }
    )
    for path in ("/a.A/X", "/b.B/Y"):
        got = config.method_config(path)
        assert (got.max_request_message_bytes, got.max_response_message_bytes) == (
            1024,
            2048,
        )
    assert config.method_config("/a.A/Y") == MethodConfig()


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("1.5s", 1.5), ("0.100s", 0.1), ("0s", 0.0), ("2s", 2.0), ("0.000000001s", 1e-9)],
)
def test_duration_forms(text: str, seconds: float) -> None:
    """Protobuf JSON durations: decimal seconds, up to nine digits, trailing s."""
    config = parse_service_config({"methodConfig": [{"name": [{}], "timeout": text}]})
    assert config.method_config("/a.B/C").timeout == pytest.approx(seconds)


def test_status_codes_by_name_and_number() -> None:
    """retryableStatusCodes takes names and numbers alike."""
    policy = (
        parse_service_config(_with_retry(retryableStatusCodes=["UNAVAILABLE", 4, "ABORTED"]))
        .method_config("/a.B/C")
        .retry_policy
    )
    assert policy is not None
    assert policy.retryable_status_codes == {
        StatusCode.UNAVAILABLE,
        StatusCode.DEADLINE_EXCEEDED,
        StatusCode.ABORTED,
    }


def test_max_attempts_clamped_to_five() -> None:
    """maxAttempts above 5 is treated as 5 (gRFC A6)."""
    policy = parse_service_config(_with_retry(maxAttempts=9)).method_config("/a.B/C").retry_policy
    assert policy is not None
    assert policy.max_attempts == 5


def test_hedging_policy_is_accepted_and_ignored() -> None:
    """A hedgingPolicy loads but gives no retry policy (hedging is not supported)."""
    config = parse_service_config(
        {"methodConfig": [{"name": [{}], "hedgingPolicy": {"maxAttempts": 3}}]}
    )
    assert config.method_config("/a.B/C") == MethodConfig()


def test_unknown_keys_are_ignored() -> None:
    """Keys this package does not know (newer grpc fields) do not fail the config."""
    config = parse_service_config(
        {"someFutureField": 1, "methodConfig": [{"name": [{}], "newKnob": "x"}]}
    )
    assert config.method_config("/a.B/C") == MethodConfig()


def test_load_balancing_config_first_supported_wins() -> None:
    """Unknown policies are skipped; the first supported one is used."""
    config = parse_service_config(
        {
            "loadBalancingConfig": [
                {"grpclb": {}},
                {"round_robin": {}},
                {"pick_first": {}},
            ]
        }
    )
    assert config.lb_policy == "round_robin"


def test_legacy_load_balancing_policy() -> None:
    """loadBalancingPolicy "ROUND_ROBIN" works, and loadBalancingConfig overrides it."""
    assert parse_service_config({"loadBalancingPolicy": "ROUND_ROBIN"}).lb_policy == "round_robin"
    both = {"loadBalancingPolicy": "ROUND_ROBIN", "loadBalancingConfig": [{"pick_first": {}}]}
    assert parse_service_config(both).lb_policy == "pick_first"


def test_health_check_service_name() -> None:
    """healthCheckConfig.serviceName is kept (empty string: the server's overall health)."""
    assert (
        parse_service_config({"healthCheckConfig": {"serviceName": ""}}).health_check_service_name
        == ""
    )
    assert (
        parse_service_config(
            {"healthCheckConfig": {"serviceName": "pkg.Svc"}}
        ).health_check_service_name
        == "pkg.Svc"
    )
    assert parse_service_config({}).health_check_service_name is None


def test_token_ratio_truncated_to_three_decimals() -> None:
    """tokenRatio keeps three decimal places."""
    config = parse_service_config({"retryThrottling": {"maxTokens": 5, "tokenRatio": 0.12345}})
    assert config.retry_throttling == RetryThrottling(max_tokens=5.0, token_ratio=0.123)


def _with_retry(**changes: Any) -> dict[str, Any]:
    policy: dict[str, Any] = {
        "maxAttempts": 3,
        "initialBackoff": "0.1s",
        "maxBackoff": "1s",
        "backoffMultiplier": 2,
        "retryableStatusCodes": ["UNAVAILABLE"],
    }
    for key, value in changes.items():
        if value is _DROP:
            del policy[key]
        else:
            policy[key] = value
    return {"methodConfig": [{"name": [{}], "retryPolicy": policy}]}


_DROP = object()
_RP = "methodConfig[0].retryPolicy"


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ("[1]", "service config: must be a JSON object"),
        ("{nope", "service config: not valid JSON"),
        ({"methodConfig": {}}, "methodConfig: must be a list"),
        ({"methodConfig": [3]}, "methodConfig[0]: must be an object"),
        ({"methodConfig": [{"name": {}}]}, "methodConfig[0].name: must be a list"),
        (
            {"methodConfig": [{"name": [{"method": "M"}]}]},
            "methodConfig[0].name[0]: a name with a 'method' needs a 'service'",
        ),
        (
            {"methodConfig": [{"name": [{"service": 5}]}]},
            "methodConfig[0].name[0].service: must be a string",
        ),
        (
            {"methodConfig": [{"name": [{}]}, {"name": [{"service": ""}]}]},
            "methodConfig[1].name[0]: duplicate method name",
        ),
        (
            {"methodConfig": [{"name": [{}], "timeout": 1.5}]},
            "methodConfig[0].timeout: must be a duration string",
        ),
        (
            {"methodConfig": [{"name": [{}], "timeout": "-1s"}]},
            "methodConfig[0].timeout: must be >= 0",
        ),
        (
            {"methodConfig": [{"name": [{}], "timeout": "1.5"}]},
            "methodConfig[0].timeout: must be a duration string",
        ),
        (
            {"methodConfig": [{"name": [{}], "timeout": "0.1234567891s"}]},
            "methodConfig[0].timeout: must be a duration string",
        ),
        (
            {"methodConfig": [{"name": [{}], "waitForReady": "yes"}]},
            "methodConfig[0].waitForReady: must be true or false",
        ),
        (
            {"methodConfig": [{"name": [{}], "maxRequestMessageBytes": -1}]},
            "methodConfig[0].maxRequestMessageBytes: must be an integer >= 0",
        ),
        (
            {"methodConfig": [{"name": [{}], "maxResponseMessageBytes": 1.5}]},
            "methodConfig[0].maxResponseMessageBytes: must be an integer >= 0",
        ),
        (
            {
                "methodConfig": [
                    {
                        "name": [{}],
                        "retryPolicy": _with_retry()["methodConfig"][0]["retryPolicy"],
                        "hedgingPolicy": {},
                    }
                ]
            },
            "methodConfig[0]: give retryPolicy or hedgingPolicy, not both",
        ),
        ({"methodConfig": [{"name": [{}], "retryPolicy": 1}]}, f"{_RP}: must be an object"),
        (
            _with_retry(maxAttempts=1),
            f"{_RP}.maxAttempts: must be an integer >= 2, not a number (1)",
        ),
        (_with_retry(maxAttempts=_DROP), f"{_RP}.maxAttempts: must be an integer >= 2, not null"),
        (_with_retry(maxAttempts=True), f"{_RP}.maxAttempts: must be an integer >= 2"),
        (_with_retry(maxAttempts=2.5), f"{_RP}.maxAttempts: must be an integer >= 2"),
        (_with_retry(initialBackoff="0s"), f"{_RP}.initialBackoff: must be > 0"),
        (_with_retry(initialBackoff=_DROP), f"{_RP}.initialBackoff: must be a duration"),
        (_with_retry(maxBackoff="-2s"), f"{_RP}.maxBackoff: must be > 0"),
        (_with_retry(backoffMultiplier=0), f"{_RP}.backoffMultiplier: must be > 0"),
        (_with_retry(backoffMultiplier="x"), f"{_RP}.backoffMultiplier: must be a number"),
        (_with_retry(backoffMultiplier=_DROP), f"{_RP}.backoffMultiplier: must be a number"),
        (_with_retry(retryableStatusCodes=[]), f"{_RP}.retryableStatusCodes: must be a non-empty"),
        (_with_retry(retryableStatusCodes="UNAVAILABLE"), f"{_RP}.retryableStatusCodes: must be"),
        (
            _with_retry(retryableStatusCodes=["UNAVAILABLE", "unavailable"]),
            f"{_RP}.retryableStatusCodes[1]: must be a status code name",
        ),
        (
            _with_retry(retryableStatusCodes=[17]),
            f"{_RP}.retryableStatusCodes[0]: must be a status",
        ),
        (_with_retry(retryableStatusCodes=["OK"]), f"{_RP}.retryableStatusCodes[0]: OK is not"),
        ({"retryThrottling": []}, "retryThrottling: must be an object"),
        (
            {"retryThrottling": {"maxTokens": 0, "tokenRatio": 1}},
            "retryThrottling.maxTokens: must be in",
        ),
        (
            {"retryThrottling": {"maxTokens": 1001, "tokenRatio": 1}},
            "retryThrottling.maxTokens: must be in",
        ),
        ({"retryThrottling": {"tokenRatio": 1}}, "retryThrottling.maxTokens: must be a number"),
        (
            {"retryThrottling": {"maxTokens": 10, "tokenRatio": 0.0001}},
            "retryThrottling.tokenRatio: must be > 0",
        ),
        ({"loadBalancingConfig": {}}, "loadBalancingConfig: must be a list"),
        ({"loadBalancingConfig": [{}]}, "loadBalancingConfig[0]: must have exactly one key"),
        (
            {"loadBalancingConfig": [{"round_robin": 1}]},
            "loadBalancingConfig[0].round_robin: must be an object",
        ),
        (
            {"loadBalancingConfig": [{"grpclb": {}}, {"xds": {}}]},
            "loadBalancingConfig: no supported policy among ['grpclb', 'xds']",
        ),
        ({"loadBalancingPolicy": "LEAST_REQUEST"}, "loadBalancingPolicy: unsupported policy"),
        ({"loadBalancingPolicy": 3}, "loadBalancingPolicy: must be a string"),
        ({"healthCheckConfig": {"serviceName": 3}}, "healthCheckConfig.serviceName: must be a"),
    ],
)
def test_invalid_fields_name_their_path(config: Any, message: str) -> None:
    """Each kind of bad field raises ValueError beginning with its JSON path."""
    with pytest.raises(ValueError, match=r".") as info:
        parse_service_config(config)
    assert str(info.value).startswith(message), str(info.value)


def test_wrong_argument_type() -> None:
    """A non-string, non-mapping argument is a TypeError naming what is accepted."""
    with pytest.raises(TypeError, match="a JSON string, a mapping or None"):
        parse_service_config(3)  # type: ignore[arg-type]


@given(
    seconds=st.integers(min_value=0, max_value=10**6),
    nanos=st.integers(min_value=0, max_value=999_999_999),
)
def test_duration_round_trip(seconds: int, nanos: int) -> None:
    """Any seconds.nanos duration string parses to that many seconds."""
    text = f"{seconds}.{nanos:09d}s"
    config = parse_service_config({"methodConfig": [{"name": [{}], "timeout": text}]})
    assert config.method_config("/a.B/C").timeout == pytest.approx(seconds + nanos / 1e9)


@given(
    attempts=st.integers(min_value=2, max_value=100),
    codes=st.sets(st.sampled_from([c for c in StatusCode if c is not StatusCode.OK]), min_size=1),
    as_names=st.booleans(),
)
def test_retry_policy_property(attempts: int, codes: set[StatusCode], as_names: bool) -> None:
    """Valid retry policies parse, maxAttempts clamped to 5, codes kept exactly."""
    raw = [c.name if as_names else int(c) for c in codes]
    policy = (
        parse_service_config(_with_retry(maxAttempts=attempts, retryableStatusCodes=raw))
        .method_config("/x.Y/Z")
        .retry_policy
    )
    assert policy is not None
    assert policy.max_attempts == min(attempts, 5)
    assert policy.retryable_status_codes == codes


_names = st.text(alphabet="abcXYZ.", min_size=1, max_size=4)


@given(
    entries=st.lists(st.tuples(_names, st.one_of(st.just(""), _names)), unique=True, max_size=6),
    service=_names,
    method=_names,
)
def test_lookup_matches_reference(
    entries: list[tuple[str, str]], service: str, method: str
) -> None:
    """method_config agrees with a direct reading of the lookup rule."""
    config = parse_service_config(
        {
            "methodConfig": [
                {"name": [{"service": s, "method": m}], "timeout": f"{i}s"}
                for i, (s, m) in enumerate(entries)
            ]
        }
    )
    expected = None
    for key in ((service, method), (service, "")):
        if key in entries:
            expected = float(entries.index(key))
            break
    assert config.method_config(f"/{service}/{method}").timeout == expected


def test_method_config_of_an_unnamed_method_is_one_shared_empty_entry() -> None:
    """Every call of a channel with a service config looks its method up: a method
    the config does not name gets one shared empty entry, none built per call."""
    policy_only = parse_service_config({"loadBalancingConfig": [{"round_robin": {}}]})
    named = parse_service_config({"methodConfig": [{"name": [{"service": "a.B"}]}]})
    empty = policy_only.method_config("/x.Y/Z")
    assert empty == MethodConfig()
    assert policy_only.method_config("/p.Q/R") is empty
    assert named.method_config("/x.Y/Z") is empty
    assert named.method_config("/a.B/C") is not empty
