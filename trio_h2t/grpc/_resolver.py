"""Name resolution of a ``dns:`` target, again and again while the channel lives.

Theory of operation
-------------------
A channel's backends are the addresses its target's name resolves to (grpc's
doc/naming.md). Names change (a Kubernetes headless Service gains and loses pods),
so :class:`Resolver` resolves the name again, in one task of the balancer's
nursery:

- on a timer: ``refresh_interval`` seconds after the last resolution (None: no
  timer; grpc's own DNS resolver has none and relies on ``max_connection_age``);
- on request (:meth:`Resolver.request`): the balancer asks when a subchannel's
  connection ends or a connect fails, as grpc's subchannels do;
- never sooner than ``min_interval`` seconds after the last one (grpc's
  ``grpc.dns_min_time_between_resolutions_ms`` cool-down), so a flapping backend
  cannot hammer the DNS server.

Each result goes to the balancer's ``update`` callback, which adds a subchannel
for an address that appeared and drains the subchannel of one that disappeared. A
failed resolution, or one that finds no address, keeps the addresses of before (a
DNS blip does not empty the channel) and the next try comes at the next request
or timer.

The resolving function is a seam: ``resolve_dns`` (trio's ``getaddrinfo``, every
A/AAAA record) by default, or any ``async (host, port) -> addresses`` function
given as ``open_channel(..., resolver=...)`` (tests feed the loopback addresses of
real servers that way).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence

import trio

__all__ = [
    "RESOLVE_ERRORS",
    "Address",
    "ResolveFunction",
    "Resolver",
    "check_address",
    "check_resolver_options",
    "resolve_dns",
]

#: A backend address: (host, port) for TCP, or a Unix socket path.
Address = tuple[str, int] | str

#: ``async (host, port) -> addresses``: what ``open_channel(resolver=...)`` takes.
ResolveFunction = Callable[[str, int], Awaitable[Sequence[Address]]]

#: What a failed resolution may raise (kept to these: anything else is a bug).
RESOLVE_ERRORS = (OSError, ValueError)


async def resolve_dns(host: str, port: int) -> list[Address]:
    """Every address ``host`` resolves to (trio's ``getaddrinfo``, TCP), in the
    resolver's order, duplicates dropped.

    Checkpoint: always. On cancellation: nothing is resolved.
    Raises: OSError (``socket.gaierror``) if the name does not resolve.
    """
    infos = await trio.socket.getaddrinfo(host, port, type=trio.socket.SOCK_STREAM)
    seen: list[Address] = []
    for _family, _type, _proto, _name, sockaddr in infos:
        address = (str(sockaddr[0]), int(sockaddr[1]))
        if address not in seen:
            seen.append(address)
    return seen


def check_address(address: object, where: str) -> Address:
    """``address`` if it is a (host, port) pair or a socket path, else TypeError."""
    if isinstance(address, str) and address:
        return address
    if (
        isinstance(address, tuple)
        and len(address) == 2
        and isinstance(address[0], str)
        and isinstance(address[1], int)
        and not isinstance(address[1], bool)
        and 0 < address[1] < 65536
    ):
        return (address[0], address[1])
    raise TypeError(
        f"{where} gave {address!r}: an address is a (host, port) pair"
        " like ('10.0.0.1', 50051) or a Unix socket path"
    )


def check_resolver_options(
    resolver: ResolveFunction | None,
    refresh_interval: float | None,
    min_interval: float,
) -> None:
    """TypeError / ValueError naming the fix for a wrong resolver option."""
    if resolver is not None and not callable(resolver):
        raise TypeError(
            "resolver takes an async function (host, port) -> addresses,"
            f" not {type(resolver).__name__}"
        )
    for name, value in (
        ("dns_refresh_interval", refresh_interval),
        ("dns_min_time_between_resolutions", min_interval),
    ):
        if value is None and name == "dns_refresh_interval":
            continue
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise TypeError(f"{name} takes seconds as a number, not {value!r}")
        if not value >= 0 or value == float("inf"):
            raise ValueError(f"{name} must be finite and >= 0 seconds, not {value!r}")
    if refresh_interval is not None and refresh_interval <= 0:
        raise ValueError(
            f"dns_refresh_interval must be > 0 seconds (None: no timer), not {refresh_interval!r}"
        )


class Resolver:
    """Resolves ``host:port`` again on a timer and on request (the module's
    docstring). Owner: the balancer's resolver task (``run``); ``request`` is sync
    and may be called from any task of the channel."""

    def __init__(
        self,
        host: str,
        port: int,
        *,
        resolve: ResolveFunction = resolve_dns,
        refresh_interval: float | None = 30.0,
        min_interval: float = 5.0,
    ) -> None:
        self.host = host  # immutable after init
        self.port = port  # immutable after init
        self._resolve = resolve  # immutable after init
        self.refresh_interval = refresh_interval  # immutable after init
        self.min_interval = min_interval  # immutable after init
        self._last = trio.current_time()  # owner: resolve / run: when it last resolved
        # shared: set by request (any task), replaced by run before each resolution
        self._requested = trio.Event()
        self.resolutions = 0  # owner: resolve / run: how many resolutions ran

    def request(self) -> None:
        """Ask for a resolution soon (at once if the last one is ``min_interval``
        old, else once it is). Never checkpoints."""
        self._requested.set()

    async def resolve(self) -> list[Address]:
        """Resolve once now: the addresses, checked and deduplicated (may be empty).

        Checkpoint: always. On cancellation: nothing is resolved.
        Raises: what the resolving function raises (OSError for a name that does
        not resolve), TypeError for a result that is not a sequence of addresses.
        """
        self._last = trio.current_time()
        self.resolutions += 1
        found = await self._resolve(self.host, self.port)
        if isinstance(found, str | bytes) or not isinstance(found, Sequence):
            raise TypeError(f"resolver returned {found!r}: return a list of addresses")
        addresses: list[Address] = []
        for item in found:
            address = check_address(item, "resolver")
            if address not in addresses:
                addresses.append(address)
        return addresses

    async def run(self, update: Callable[[list[Address]], None]) -> None:
        """Resolve on each timer or request (rate-limited), handing every non-empty
        result to ``update``; until cancelled.

        Checkpoint: always. On cancellation: a resolution in progress is dropped.
        """
        while True:
            every = self.refresh_interval
            timer = float("inf") if every is None else self._last + every
            with trio.move_on_at(timer):
                await self._requested.wait()
            await trio.sleep_until(self._last + self.min_interval)
            self._requested = trio.Event()  # a request from now on asks for the next one
            try:
                addresses = await self.resolve()
            except RESOLVE_ERRORS:
                continue  # keep the addresses of before; retry at the next request/timer
            if addresses:
                update(addresses)
