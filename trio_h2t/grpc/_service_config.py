"""The gRPC service config: parsing and per-method lookup (sans-IO).

Theory of operation
-------------------
A service config is the JSON form of grpc's ``grpc.service_config.ServiceConfig``
proto (grpc/grpc ``doc/service_config.md``; retries and throttling in gRFC A6). Keys
are the proto's camelCase JSON names. :func:`parse_service_config` checks every field
this package acts on and raises :class:`ValueError` whose message begins with the
JSON path of the bad field (``methodConfig[0].retryPolicy.maxAttempts: ...``), so a
wrong config fails where it is given, not on some later call. Keys it does not know
are ignored, as grpc's parsers do, so a config written for a newer client still loads.

- ``methodConfig[i].name[j]`` is ``{"service": S, "method": M}``. With ``method``
  empty or absent the entry is the service's default; with ``service`` empty too it
  is the default for every method (``method`` without ``service`` is an error). A
  name given twice is an error. :meth:`ServiceConfig.method_config` looks up the
  exact method, then the service's entry, then the default.
- Durations are protobuf's JSON ``Duration``: decimal seconds with up to nine
  fractional digits and a trailing ``s`` (``"1.5s"``, ``"0.100s"``).
- Status codes are names (``"UNAVAILABLE"``) or numbers (``14``); ``OK`` is not a
  failure and is refused.
- ``retryPolicy`` (gRFC A6): ``maxAttempts`` an integer >= 2 (above 5 clamped to 5),
  ``initialBackoff``/``maxBackoff`` positive, ``backoffMultiplier`` > 0,
  ``retryableStatusCodes`` non-empty. ``hedgingPolicy`` is accepted and ignored
  (hedging is not supported; such a method's calls are not retried), but a method
  may not give both, since the proto makes them a ``oneof``.
- ``retryThrottling``: ``maxTokens`` in (0, 1000], ``tokenRatio`` > 0, kept to three
  decimal places (the rest truncated, as grpc does).
- ``loadBalancingConfig`` is a list of one-key objects; the first whose policy this
  package supports (``pick_first``, ``round_robin``) wins, unknown ones are skipped,
  and a list with none supported is an error. The legacy ``loadBalancingPolicy``
  (``"ROUND_ROBIN"``, any case) counts only when ``loadBalancingConfig`` is absent.

Nothing here does I/O or imports trio.
"""

from __future__ import annotations

import contextlib
import json
import math
import re
import types
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, final

from ._status import StatusCode

__all__ = [
    "MethodConfig",
    "RetryPolicy",
    "RetryThrottling",
    "ServiceConfig",
    "parse_service_config",
]

#: Load-balancing policies this package implements, by their service-config names.
SUPPORTED_LB_POLICIES = frozenset({"pick_first", "round_robin"})

#: gRFC A6: "maxAttempts ... values greater than 5 are treated as 5".
MAX_RETRY_ATTEMPTS = 5

_DURATION = re.compile(r"(-?)(\d+)(?:\.(\d{1,9}))?s\Z")


@final
@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """A method's ``retryPolicy`` (gRFC A6); durations in seconds."""

    max_attempts: int
    initial_backoff: float
    max_backoff: float
    backoff_multiplier: float
    retryable_status_codes: frozenset[StatusCode]


@final
@dataclass(frozen=True, slots=True)
class MethodConfig:
    """What the service config says about one method; None where it says nothing."""

    timeout: float | None = None
    wait_for_ready: bool | None = None
    max_request_message_bytes: int | None = None
    max_response_message_bytes: int | None = None
    retry_policy: RetryPolicy | None = None


@final
@dataclass(frozen=True, slots=True)
class RetryThrottling:
    """The channel's ``retryThrottling`` token bucket parameters (gRFC A6)."""

    max_tokens: float
    token_ratio: float


@final
@dataclass(frozen=True, slots=True)
class ServiceConfig:
    """A parsed service config (:func:`parse_service_config`).

    ``method_configs`` maps ``(service, method)`` to the entry named so; ``""`` stands
    for "any" (``(S, "")`` is service S's entry, ``("", "")`` the default).
    """

    lb_policy: str = "pick_first"
    health_check_service_name: str | None = None
    retry_throttling: RetryThrottling | None = None
    method_configs: Mapping[tuple[str, str], MethodConfig] = field(
        default_factory=lambda: types.MappingProxyType({}), hash=False
    )

    def method_config(self, method: str) -> MethodConfig:
        """The entry for the call path ``"/pkg.Service/Method"``, or an empty one.

        Lookup order (``doc/service_config.md``): the exact service and method, then
        the service's entry, then the default entry.
        """
        configs = self.method_configs
        if not configs:  # a config with no methodConfig (only a policy, say): every call
            return _NO_METHOD_CONFIG
        service, _, name = method.lstrip("/").partition("/")
        for key in ((service, name), (service, ""), ("", "")):
            found = configs.get(key)
            if found is not None:
                return found
        return _NO_METHOD_CONFIG


#: The entry of a method the config says nothing about (frozen, so one is shared:
#: ``method_config`` runs on every call of a channel with a service config).
_NO_METHOD_CONFIG = MethodConfig()


def parse_service_config(config: str | Mapping[str, Any] | None) -> ServiceConfig:
    """Parse a service config given as JSON text or as the decoded mapping.

    None gives the default :class:`ServiceConfig`. Raises :class:`ValueError` naming
    the JSON path of the first bad field; :class:`TypeError` for a wrong argument type.
    """
    if config is None:
        return ServiceConfig()
    if isinstance(config, str):
        try:
            config = json.loads(config)
        except ValueError as exc:
            raise ValueError(f"service config: not valid JSON ({exc})") from None
        if not isinstance(config, dict):
            raise ValueError(f"service config: must be a JSON object, not {type(config).__name__}")
    elif not isinstance(config, Mapping):
        raise TypeError(
            "parse_service_config() takes a JSON string, a mapping or None, "
            f"not {type(config).__name__}"
        )
    methods: dict[tuple[str, str], MethodConfig] = {}
    for i, entry in enumerate(_list(config, "methodConfig", "methodConfig")):
        path = f"methodConfig[{i}]"
        parsed = _method_config(_object(entry, path), path)
        names = _list(entry, "name", f"{path}.name")
        for j, name in enumerate(names):
            key = _name(name, f"{path}.name[{j}]")
            if key in methods:
                raise ValueError(
                    f"{path}.name[{j}]: duplicate method name "
                    f"{{service: {key[0]!r}, method: {key[1]!r}}}"
                )
            methods[key] = parsed
    health = None
    if (hc := config.get("healthCheckConfig")) is not None:
        health = _opt_str(_object(hc, "healthCheckConfig"), "serviceName", "healthCheckConfig")
    throttling = None
    if (rt := config.get("retryThrottling")) is not None:
        throttling = _retry_throttling(_object(rt, "retryThrottling"))
    return ServiceConfig(
        lb_policy=_lb_policy(config),
        health_check_service_name=health,
        retry_throttling=throttling,
        method_configs=types.MappingProxyType(methods),
    )


############################################################################
# Field parsers; each takes the JSON path for its error messages.


def _object(value: object, path: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise ValueError(f"{path}: must be an object, not {_json_type(value)}")
    return value


def _list(parent: Mapping[str, Any], key: str, path: str) -> list[Any]:
    value = parent.get(key)
    if value is None:
        return []
    if not isinstance(value, list):
        raise ValueError(f"{path}: must be a list, not {_json_type(value)}")
    return value


def _json_type(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return f"a boolean ({json.dumps(value)})"
    if isinstance(value, (int, float)):
        return f"a number ({value!r})"
    if isinstance(value, str):
        return f"a string ({value!r})"
    if isinstance(value, Mapping):
        return "an object"
    if isinstance(value, (list, tuple)):
        return "a list"
    return type(value).__name__


def _opt_str(parent: Mapping[str, Any], key: str, path: str) -> str | None:
    value = parent.get(key)
    if value is not None and not isinstance(value, str):
        where = f"{path}.{key}" if path else key
        raise ValueError(f"{where}: must be a string, not {_json_type(value)}")
    return value


def _name(value: object, path: str) -> tuple[str, str]:
    name = _object(value, path)
    service = _opt_str(name, "service", path) or ""
    method = _opt_str(name, "method", path) or ""
    if method and not service:
        raise ValueError(f"{path}: a name with a 'method' needs a 'service' too")
    return service, method


def _method_config(entry: Mapping[str, Any], path: str) -> MethodConfig:
    timeout = None
    if (raw := entry.get("timeout")) is not None:
        timeout = _duration(raw, f"{path}.timeout", allow_zero=True)
    wait_for_ready = entry.get("waitForReady")
    if wait_for_ready is not None and not isinstance(wait_for_ready, bool):
        raise ValueError(
            f"{path}.waitForReady: must be true or false, not {_json_type(wait_for_ready)}"
        )
    retry = None
    if (raw := entry.get("retryPolicy")) is not None:
        if entry.get("hedgingPolicy") is not None:
            raise ValueError(
                f"{path}: give retryPolicy or hedgingPolicy, not both (they are a oneof)"
            )
        retry = _retry_policy(_object(raw, f"{path}.retryPolicy"), f"{path}.retryPolicy")
    elif (raw := entry.get("hedgingPolicy")) is not None:
        _object(raw, f"{path}.hedgingPolicy")  # accepted, not acted on (module docstring)
    return MethodConfig(
        timeout=timeout,
        wait_for_ready=wait_for_ready,
        max_request_message_bytes=_opt_size(entry, "maxRequestMessageBytes", path),
        max_response_message_bytes=_opt_size(entry, "maxResponseMessageBytes", path),
        retry_policy=retry,
    )


def _opt_size(entry: Mapping[str, Any], key: str, path: str) -> int | None:
    value = entry.get(key)
    if value is None:
        return None
    # Protobuf's JSON mapping lets an integer come as a decimal string too.
    if isinstance(value, str) and value.isdigit():
        value = int(value)
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise ValueError(f"{path}.{key}: must be an integer >= 0, not {_json_type(value)}")
    return value


def _duration(value: object, path: str, *, allow_zero: bool = False) -> float:
    match = _DURATION.match(value) if isinstance(value, str) else None
    if match is None:
        raise ValueError(
            f'{path}: must be a duration string such as "1.5s" or "0.100s", not {_json_type(value)}'
        )
    sign, whole, frac = match.groups()
    seconds = int(whole) + int((frac or "0").ljust(9, "0")) / 1e9
    if sign or (seconds == 0 and not allow_zero):
        bound = ">= 0" if allow_zero else "> 0"
        raise ValueError(f"{path}: must be {bound}, not {value!r}")
    return seconds


def _number(parent: Mapping[str, Any], key: str, path: str) -> float:
    value = parent.get(key)
    if isinstance(value, str):  # protobuf JSON allows numbers as strings
        with contextlib.suppress(ValueError):
            value = float(value)
    if not isinstance(value, (int, float)) or isinstance(value, bool) or not math.isfinite(value):
        raise ValueError(f"{path}.{key}: must be a number, not {_json_type(value)}")
    return float(value)


def _status_code(value: object, path: str) -> StatusCode:
    code: StatusCode | None = None
    if isinstance(value, str):
        code = StatusCode.__members__.get(value)
    elif isinstance(value, int) and not isinstance(value, bool):
        code = StatusCode(value) if 0 <= value <= 16 else None
    if code is None:
        raise ValueError(
            f'{path}: must be a status code name such as "UNAVAILABLE" or a number '
            f"0..16, not {_json_type(value)}"
        )
    if code is StatusCode.OK:
        raise ValueError(f"{path}: OK is not a failure and cannot be retried")
    return code


def _retry_policy(policy: Mapping[str, Any], path: str) -> RetryPolicy:
    attempts = policy.get("maxAttempts")
    if isinstance(attempts, float) and attempts.is_integer():
        attempts = int(attempts)
    if not isinstance(attempts, int) or isinstance(attempts, bool) or attempts < 2:
        raise ValueError(f"{path}.maxAttempts: must be an integer >= 2, not {_json_type(attempts)}")
    initial = _duration(policy.get("initialBackoff"), f"{path}.initialBackoff")
    maximum = _duration(policy.get("maxBackoff"), f"{path}.maxBackoff")
    multiplier = _number(policy, "backoffMultiplier", path)
    if multiplier <= 0:
        raise ValueError(f"{path}.backoffMultiplier: must be > 0, not {multiplier!r}")
    raw_codes = policy.get("retryableStatusCodes")
    if not isinstance(raw_codes, list) or not raw_codes:
        raise ValueError(
            f"{path}.retryableStatusCodes: must be a non-empty list, not "
            + ("an empty list" if raw_codes == [] else _json_type(raw_codes))
        )
    codes = frozenset(
        _status_code(code, f"{path}.retryableStatusCodes[{k}]") for k, code in enumerate(raw_codes)
    )
    return RetryPolicy(
        max_attempts=min(attempts, MAX_RETRY_ATTEMPTS),
        initial_backoff=initial,
        max_backoff=maximum,
        backoff_multiplier=multiplier,
        retryable_status_codes=codes,
    )


def _retry_throttling(throttling: Mapping[str, Any]) -> RetryThrottling:
    path = "retryThrottling"
    max_tokens = _number(throttling, "maxTokens", path)
    if not 0 < max_tokens <= 1000:
        raise ValueError(f"{path}.maxTokens: must be in (0, 1000], not {max_tokens!r}")
    ratio = math.floor(_number(throttling, "tokenRatio", path) * 1000 + 1e-9) / 1000
    if ratio <= 0:
        raise ValueError(
            f"{path}.tokenRatio: must be > 0 (to three decimal places), "
            f"not {throttling.get('tokenRatio')!r}"
        )
    return RetryThrottling(max_tokens=max_tokens, token_ratio=ratio)


def _lb_policy(config: Mapping[str, Any]) -> str:
    entries = config.get("loadBalancingConfig")
    if entries is not None:
        path = "loadBalancingConfig"
        if not isinstance(entries, list):
            raise ValueError(f"{path}: must be a list, not {_json_type(entries)}")
        seen = []
        for i, entry in enumerate(entries):
            policy = _object(entry, f"{path}[{i}]")
            if len(policy) != 1:
                raise ValueError(
                    f"{path}[{i}]: must have exactly one key (the policy name), not {len(policy)}"
                )
            ((name, policy_config),) = policy.items()
            _object(policy_config, f"{path}[{i}].{name}")
            if name in SUPPORTED_LB_POLICIES:
                return str(name)
            seen.append(name)
        raise ValueError(
            f"{path}: no supported policy among {seen!r} "
            f"(supported: {sorted(SUPPORTED_LB_POLICIES)!r})"
        )
    legacy = _opt_str(config, "loadBalancingPolicy", "")
    if legacy is None:
        return "pick_first"
    if legacy.lower() not in SUPPORTED_LB_POLICIES:
        raise ValueError(
            f"loadBalancingPolicy: unsupported policy {legacy!r} "
            f"(supported: {sorted(SUPPORTED_LB_POLICIES)!r})"
        )
    return legacy.lower()
