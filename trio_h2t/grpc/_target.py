"""gRPC target strings (grpc's doc/naming.md), parsed without I/O.

Theory of operation
-------------------
A channel's target names what to connect to, in one of these forms:

- ``dns:[//authority/]host[:port]`` and a plain ``host[:port]`` (no scheme: dns is
  the default scheme): every address the name resolves to. The DNS authority (the
  server to ask) is accepted and ignored: the system resolver is used.
- ``ipv4:address[:port][,address[:port],...]``: literal IPv4 addresses.
- ``ipv6:address[:port][,address[:port],...]``: literal IPv6 addresses, in square
  brackets when a port follows (``ipv6:[::1]:50051``).
- ``unix:path`` (relative or absolute) and ``unix:///absolute/path``.

The port defaults to 443, as in grpc. The ``:authority`` a channel sends comes from
the target, not from each backend: the name as written (``host`` or ``host:port``)
for dns, the first address for ipv4/ipv6 (``[addr]:port`` for IPv6), and
``localhost`` for unix. Resolving a dns target is the channel's job (trio's
``getaddrinfo``); this module only splits the string, and raises ``ValueError``
naming what is wrong and the form to use.
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass
from typing import Literal

__all__ = ["DEFAULT_PORT", "Target", "parse_target"]

#: The port of a target that names none (grpc's default).
DEFAULT_PORT = 443


@dataclass(frozen=True, slots=True)
class Target:
    """A parsed gRPC target.

    ``scheme``: "dns", "ipv4", "ipv6" or "unix". ``host``/``port``: the name to
    resolve (dns only; None otherwise). ``addresses``: the literal (address, port)
    pairs of an ipv4/ipv6 target, in order (empty otherwise). ``path``: the socket
    path of a unix target (None otherwise). ``authority``: the ``:authority`` the
    channel sends.
    """

    scheme: Literal["dns", "ipv4", "ipv6", "unix"]
    authority: str
    host: str | None = None
    port: int | None = None
    addresses: tuple[tuple[str, int], ...] = ()
    path: str | None = None


#: What an IPv6 literal (with an optional ``:port``) is made of.
_IPV6_CHARS = frozenset("0123456789abcdefABCDEF:.%")
#: The schemes parse_target takes, for error messages.
_SUPPORTED = "supported: dns:, ipv4:, ipv6:, unix:"
#: A URI scheme (RFC 3986): a letter, then letters, digits, '+', '-', '.'.
_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*")


def _port(text: str, target: str) -> int:
    if not (text.isascii() and text.isdigit()) or not 0 < int(text) < 65536:
        raise ValueError(f"gRPC target {target!r}: the port must be 1..65535, not {text!r}")
    return int(text)


def _split_host_port(text: str, target: str) -> tuple[str, int | None]:
    """``host``, ``host:port``, ``[v6]`` or ``[v6]:port`` -> (host, port or None)."""
    if text.startswith("["):
        end = text.find("]")
        if end < 0:
            raise ValueError(f"gRPC target {target!r}: '[' without ']' (write [::1]:50051)")
        host, rest = text[1:end], text[end + 1 :]
        if rest == "":
            return host, None
        if not rest.startswith(":"):
            raise ValueError(f"gRPC target {target!r}: after ']' comes ':port' (write [::1]:50051)")
        return host, _port(rest[1:], target)
    if text.count(":") > 1:
        if all(c in _IPV6_CHARS for c in text):
            raise ValueError(
                f"gRPC target {target!r}: an IPv6 address with a port goes in brackets"
                " (write [::1]:50051)"
            )
        raise ValueError(
            f"gRPC target {target!r}: not host:port, and {text.partition(':')[0]!r} is not"
            f" a known scheme ({_SUPPORTED})"
        )
    host, sep, port = text.partition(":")
    return host, _port(port, target) if sep else None


def _literal(text: str, version: int, target: str) -> tuple[str, int]:
    if version == 6 and not text.startswith("[") and text.count(":") > 1:
        host, port = text, None  # a bare IPv6 address, no port
    else:
        host, port = _split_host_port(text, target)
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        address = None
    if address is None or address.version != version:
        raise ValueError(
            f"gRPC target {target!r}: {host!r} is not an IPv{version} address"
            + (" (write ipv6:[::1]:50051)" if version == 6 else " (write ipv4:127.0.0.1:50051)")
        )
    return str(address), DEFAULT_PORT if port is None else port


def _authority(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def parse_target(target: str) -> Target:
    """Parse a gRPC target string (grpc's doc/naming.md). Raises ValueError for a
    malformed one, TypeError for one that is not a str."""
    if not isinstance(target, str):
        raise TypeError(
            f"a gRPC target is a str like 'dns:///host:50051', not {type(target).__name__}"
        )
    if not target or target.strip() != target:
        raise ValueError(f"gRPC target {target!r}: empty, or has surrounding whitespace")
    scheme, sep, rest = target.partition(":")
    if sep and scheme in ("ipv4", "ipv6"):
        return _ip_target(scheme, rest, target)
    if sep and scheme == "unix":
        return _unix_target(rest, target)
    return _dns_target(_dns_name(scheme, sep, rest, target), target)


def _ip_target(scheme: str, rest: str, target: str) -> Target:
    """``ipv4:`` and ``ipv6:`` targets: addresses, comma-separated."""
    if not rest:
        raise ValueError(f"gRPC target {target!r}: no address after '{scheme}:'")
    version = 4 if scheme == "ipv4" else 6
    addresses = tuple(_literal(part, version, target) for part in rest.split(","))
    return Target(
        "ipv4" if version == 4 else "ipv6", _authority(*addresses[0]), addresses=addresses
    )


def _unix_target(rest: str, target: str) -> Target:
    """``unix:path`` (relative or absolute) and ``unix:///absolute/path``."""
    path = rest[2:] if rest.startswith("//") else rest
    if rest.startswith("//") and not path.startswith("/"):
        raise ValueError(
            f"gRPC target {target!r}: 'unix://' takes an absolute path"
            " (write unix:///tmp/sock or unix:relative/sock)"
        )
    if not path:
        raise ValueError(f"gRPC target {target!r}: no socket path after 'unix:'")
    return Target("unix", "localhost", path=path)


def _dns_name(scheme: str, sep: str, rest: str, target: str) -> str:
    """The ``host[:port]`` of a DNS target: after ``dns:`` or ``dns://authority/``,
    else the whole target (``host:port``); ValueError for an unknown scheme."""
    if sep and scheme == "dns":
        if not rest.startswith("//"):
            return rest
        _dns_authority, slash, name = rest[2:].partition("/")
        if not slash:
            raise ValueError(
                f"gRPC target {target!r}: 'dns://' needs '/' before the name"
                " (write dns:///host:50051)"
            )
        return name
    if sep and rest.startswith("//"):
        raise ValueError(f"gRPC target {target!r}: unknown scheme {scheme!r} ({_SUPPORTED})")
    if sep and _SCHEME.fullmatch(scheme) and ":" not in rest and not rest.isdigit():
        # "scheme:x" with x no port: an unsupported scheme, or a bad port.
        raise ValueError(
            f"gRPC target {target!r}: {scheme!r} is an unknown scheme ({_SUPPORTED}),"
            f" or the port must be 1..65535, not {rest!r}"
        )
    return target


def _dns_target(name: str, target: str) -> Target:
    """A DNS target for ``name`` (``host[:port]``)."""
    if not name:
        raise ValueError(f"gRPC target {target!r}: no host name")
    host, port = _split_host_port(name, target)
    if not host:
        raise ValueError(f"gRPC target {target!r}: no host name before ':port'")
    if any(c in host for c in "/ ,@?#"):
        raise ValueError(f"gRPC target {target!r}: {host!r} is not a host name")
    return Target("dns", name, host=host, port=DEFAULT_PORT if port is None else port)
