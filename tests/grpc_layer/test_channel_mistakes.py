"""What a new user of the scale-out channel features runs into, against real
trio_h2t.grpc servers on loopback: errors raised in the channel's block come out
as themselves, retries under interceptors and credentials, a name that does not
resolve, wrong interceptors, a closed channel's state waits, the deadline during a
retry backoff, options that do not apply to the form chosen, and target messages
(trio_h2t/grpc/_client.py, _interceptors.py, _retrying.py, _target.py;
docs/grpc-channels.md, docs/grpc.md)."""

from __future__ import annotations

import contextlib
import os
import socket
import tempfile
import warnings
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import pytest
import trio

import trio_h2t
from trio_h2t import grpc
from trio_h2t.grpc import ConnectivityState

LIMIT = 10
FAST = grpc.ConnectionBackoff(
    initial_backoff=0.05, multiplier=1.6, jitter=0.2, max_backoff=0.2, min_connect_timeout=1.0
)


def _retry_config(backoff: str = "0.01s") -> dict[str, Any]:
    return {
        "methodConfig": [
            {
                "name": [{"service": "t.T"}],
                "retryPolicy": {
                    "maxAttempts": 3,
                    "initialBackoff": backoff,
                    "maxBackoff": backoff,
                    "backoffMultiplier": 1,
                    "retryableStatusCodes": ["UNAVAILABLE"],
                },
            }
        ]
    }


class Flaky:
    """Each method fails UNAVAILABLE 'busy' ``failures`` times, then answers; with
    ``pushback`` (milliseconds), each failure asks for that exact retry delay
    (``grpc-retry-pushback-ms``) instead of the policy's random backoff."""

    def __init__(self, failures: int = 2, pushback: str | None = None) -> None:
        self.failures = failures
        self.pushback = pushback
        self.attempts = 0

    def _fail_first(self) -> None:
        self.attempts += 1
        if self.attempts <= self.failures:
            trailing = [] if self.pushback is None else [("grpc-retry-pushback-ms", self.pushback)]
            raise grpc.RpcError(grpc.StatusCode.UNAVAILABLE, "busy", trailing_metadata=trailing)

    async def echo(self, request: bytes, context: grpc.ServicerContext) -> bytes:
        self._fail_first()
        return request

    async def expand(self, request: bytes, context: grpc.ServicerContext) -> AsyncIterator[bytes]:
        self._fail_first()
        yield request
        yield request

    async def gather(self, requests: AsyncIterator[bytes], context: grpc.ServicerContext) -> bytes:
        self._fail_first()
        return b"".join([r async for r in requests])

    def server(self) -> grpc.Server:
        return grpc.Server(
            [
                {
                    "/t.T/Echo": grpc.unary_unary_handler(self.echo),
                    "/t.T/Expand": grpc.unary_stream_handler(self.expand),
                    "/t.T/Gather": grpc.stream_unary_handler(self.gather),
                }
            ]
        )


@asynccontextmanager
async def serving(flaky: Flaky) -> AsyncIterator[int]:
    """``flaky`` on 127.0.0.1; gives the port."""
    async with trio_h2t.open_server(flaky.server(), 0, host="127.0.0.1") as server:
        yield server.port


@asynccontextmanager
async def unix_serving(flaky: Flaky) -> AsyncIterator[str]:
    """``flaky`` on a Unix socket in a temporary folder; gives the path."""
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "s")
        sock = trio.socket.socket(trio.socket.AF_UNIX, trio.socket.SOCK_STREAM)
        await sock.bind(path)
        sock.listen()
        async with trio.open_nursery() as nursery:
            await nursery.start(
                trio_h2t.serve_listeners, flaky.server(), [trio.SocketListener(sock)]
            )
            yield path
            nursery.cancel_scope.cancel()


async def _loopback(host: str, port: int) -> list[tuple[str, int]]:
    return [("127.0.0.1", port)]


def _forms(port: int, path: str) -> dict[str, Callable[[], Any]]:
    return {
        "host-port-string": lambda: grpc.open_channel(f"127.0.0.1:{port}", backoff=FAST),
        "ipv4": lambda: grpc.open_channel(f"ipv4:127.0.0.1:{port}", backoff=FAST),
        "dns": lambda: grpc.open_channel(
            f"dns:///backend.test:{port}", backoff=FAST, resolver=_loopback
        ),
        "unix": lambda: grpc.open_channel(f"unix:{path}", backoff=FAST),
        "host-and-port": lambda: grpc.open_channel("127.0.0.1", port),
    }


# -- 1: an exception raised in the block comes out as itself


async def test_errors_in_the_block_come_out_unwrapped_for_every_target_form() -> None:
    """An RpcError and a KeyError raised in `async with open_channel(...)` come out
    as themselves (no ExceptionGroup), for every target form and (host, port)."""
    flaky = Flaky(failures=0)
    with trio.fail_after(LIMIT):
        async with serving(flaky) as port, unix_serving(flaky) as path:
            for name, opener in _forms(port, path).items():
                caught: grpc.RpcError | None = None
                try:  # the plain `except` a user writes, not pytest.raises
                    async with opener() as channel:
                        await channel.unary_unary("/t.T/Echo")(b"x", wait_for_ready=True)
                        raise grpc.RpcError(grpc.StatusCode.NOT_FOUND, name)
                except grpc.RpcError as exc:
                    caught = exc
                assert caught is not None
                assert caught.code == grpc.StatusCode.NOT_FOUND
                assert caught.details == name
                with pytest.raises(KeyError, match=name):
                    async with opener():
                        raise KeyError(name)


# -- 2: retries under interceptors and call credentials


@pytest.mark.parametrize("how", ["call_credentials", "interceptor"])
@pytest.mark.parametrize("kind", ["unary_unary", "unary_stream", "stream_unary"])
async def test_retry_policy_holds_under_interceptors_and_credentials(how: str, kind: str) -> None:
    """With call_credentials or an interceptor, a retryPolicy still makes 3 attempts
    (UNAVAILABLE twice, then OK), and the interceptor is entered once per call."""
    flaky = Flaky(failures=2)
    entered: list[str] = []

    @contextlib.asynccontextmanager
    async def interceptor(details: grpc.ClientCallDetails) -> AsyncIterator[None]:
        entered.append(details.method)
        yield

    def credentials(context: grpc.CallCredentialsContext) -> list[tuple[str, str]]:
        entered.append(context.method_name)
        return [("authorization", "Bearer t")]

    options: dict[str, Any] = (
        {"call_credentials": credentials, "insecure_call_credentials": True}
        if how == "call_credentials"
        else {"interceptors": [interceptor]}
    )
    with trio.fail_after(LIMIT):
        async with (
            serving(flaky) as port,
            grpc.open_channel(
                f"127.0.0.1:{port}", backoff=FAST, service_config=_retry_config(), **options
            ) as channel,
        ):
            if kind == "unary_unary":
                assert await channel.unary_unary("/t.T/Echo")(b"x") == b"x"
            elif kind == "unary_stream":
                async with channel.unary_stream("/t.T/Expand")(b"y") as call:
                    assert [m async for m in call] == [b"y", b"y"]
            else:
                assert await channel.stream_unary("/t.T/Gather")([b"a", b"b"]) == b"ab"
    assert flaky.attempts == 3
    assert len(entered) == 1


# -- 3: a name that does not resolve


async def _no_such_host(host: str, port: int) -> list[tuple[str, int]]:
    raise OSError(f"[Errno -2] Name or service not known: {host}")


async def _no_address(host: str, port: int) -> list[tuple[str, int]]:
    return []


@pytest.mark.parametrize("resolver", [_no_such_host, _no_address], ids=["error", "empty"])
async def test_a_name_that_does_not_resolve_fails_the_open_unavailable(
    resolver: Callable[[str, int], Any],
) -> None:
    """A dns target whose name does not resolve (an error, or no address) fails at
    open with RpcError UNAVAILABLE naming the host (never a bare socket error)."""
    with trio.fail_after(LIMIT), pytest.raises(grpc.RpcError) as info:
        async with grpc.open_channel("dns:///no-such-host.invalid:50051", resolver=resolver):
            pytest.fail("the channel opened")  # pragma: no cover
    assert info.value.code == grpc.StatusCode.UNAVAILABLE
    assert "'no-such-host.invalid'" in (info.value.details or "")


async def test_the_system_resolver_failure_is_unavailable_too() -> None:
    """The default resolver's socket.gaierror for a .invalid name is an RpcError
    UNAVAILABLE naming the host and carrying the resolver's error as __cause__."""
    with trio.fail_after(LIMIT), pytest.raises(grpc.RpcError) as info:
        async with grpc.open_channel("dns:///no-such-host.invalid:50051"):
            pytest.fail("the channel opened")  # pragma: no cover
    assert info.value.code == grpc.StatusCode.UNAVAILABLE
    assert "cannot resolve 'no-such-host.invalid'" in (info.value.details or "")
    assert isinstance(info.value.__cause__, OSError)


# -- 4: wait_for_ready on every call kind


async def test_wait_for_ready_is_taken_by_every_call_kind() -> None:
    """wait_for_ready= is accepted per call by all four method kinds."""
    flaky = Flaky(failures=0)
    with trio.fail_after(LIMIT):
        async with serving(flaky) as port, grpc.open_channel(f"127.0.0.1:{port}") as channel:
            assert await channel.unary_unary("/t.T/Echo")(b"x", wait_for_ready=True) == b"x"
            async with channel.unary_stream("/t.T/Expand")(b"y", wait_for_ready=True) as call:
                assert [m async for m in call] == [b"y", b"y"]
            got = await channel.stream_unary("/t.T/Gather")([b"a"], wait_for_ready=True)
            assert got == b"a"
            async with channel.stream_stream("/t.T/Nope")([], wait_for_ready=True) as call:
                with pytest.raises(grpc.RpcError) as info:
                    await call.receive_message()
            assert info.value.code == grpc.StatusCode.UNIMPLEMENTED


# -- 6: wrong interceptors refused when the channel or server is made


async def _plain_async(details: grpc.ClientCallDetails) -> None:
    pass


async def _undecorated(details: grpc.ClientCallDetails) -> AsyncIterator[None]:
    yield


@contextlib.asynccontextmanager
async def _two_args(details: Any, extra: Any) -> AsyncIterator[None]:
    yield  # pragma: no cover


@pytest.mark.parametrize(
    ("interceptors", "match"),
    [
        ([_plain_async], "plain `async def`.*asynccontextmanager"),
        ([_undecorated], "undecorated async generator.*@contextlib.asynccontextmanager"),
        ([_two_args], r"cannot take \(details\)"),
        (_plain_async, r"must be a sequence \(a list\)"),
    ],
    ids=["async-def", "async-generator", "arity", "not-a-list"],
)
def test_wrong_client_interceptors_are_refused_at_open(interceptors: Any, match: str) -> None:
    """A plain async def, an undecorated async generator, a wrong arity, or one
    interceptor not in a list: TypeError naming the shape, before connecting."""
    with pytest.raises(TypeError, match=match):
        grpc.open_channel("127.0.0.1:1", interceptors=interceptors)
    with pytest.raises(TypeError, match=match):
        grpc.open_channel("127.0.0.1", 1, interceptors=interceptors)


async def test_an_interceptor_returning_no_context_manager_fails_naming_it() -> None:
    """An interceptor (a callable object) that returns a coroutine fails the call
    with TypeError naming it, and leaves no never-awaited coroutine warning."""

    class Sneaky:
        def __call__(self, details: grpc.ClientCallDetails) -> Any:
            return _plain_async(details)

        def __repr__(self) -> str:
            return "<Sneaky>"

    flaky = Flaky(failures=0)
    with trio.fail_after(LIMIT), warnings.catch_warnings():
        warnings.simplefilter("error")
        async with (
            serving(flaky) as port,
            grpc.open_channel("127.0.0.1", port, interceptors=[Sneaky()]) as channel,
        ):
            with pytest.raises(TypeError, match="<Sneaky> returned coroutine"):
                await channel.unary_unary("/t.T/Echo")(b"x")
    assert flaky.attempts == 0


def _sync_server(details: Any, proceed: Any) -> None:
    pass  # pragma: no cover


async def _one_arg_server(details: Any) -> None:
    pass  # pragma: no cover


async def _gen_server(details: Any, proceed: Any) -> AsyncIterator[None]:
    yield  # pragma: no cover


@pytest.mark.parametrize(
    ("interceptors", "match"),
    [
        ([_sync_server], "plain function"),
        ([_one_arg_server], r"cannot take \(details, proceed\)"),
        ([_gen_server], "async generator"),
        (_sync_server, r"must be a sequence \(a list\)"),
    ],
    ids=["plain-def", "arity", "async-generator", "not-a-list"],
)
def test_wrong_server_interceptors_are_refused_at_construction(
    interceptors: Any, match: str
) -> None:
    """grpc.Server refuses a plain def, a wrong arity, an async generator, or one
    interceptor not in a list, with TypeError naming the shape."""
    with pytest.raises(TypeError, match=match):
        grpc.Server([], interceptors=interceptors)


# -- 7: a closed channel's state waits


async def test_waiting_on_a_closed_channel_raises_closed_resource_error() -> None:
    """wait_for_state_change(SHUTDOWN) and wait_for_subchannel_change on a closed
    channel raise trio.ClosedResourceError at once, on both forms."""
    flaky = Flaky(failures=0)
    with trio.fail_after(LIMIT):
        async with serving(flaky) as port:
            forms = _forms(port, "unused")
            for name in ("host-port-string", "host-and-port"):
                async with forms[name]() as channel:
                    await channel.unary_unary("/t.T/Echo")(b"x", wait_for_ready=True)
                assert channel.get_state() is ConnectivityState.SHUTDOWN
                with pytest.raises(trio.ClosedResourceError, match="SHUTDOWN"):
                    await channel.wait_for_state_change(ConnectivityState.SHUTDOWN)
                with pytest.raises(trio.ClosedResourceError, match="SHUTDOWN"):
                    await channel.wait_for_subchannel_change()
                got = await channel.wait_for_state_change(ConnectivityState.READY)
                assert got is ConnectivityState.SHUTDOWN


# -- 8: DEADLINE_EXCEEDED during a retry backoff


async def test_deadline_during_a_backoff_names_the_attempts_and_the_last_status() -> None:
    """A deadline that ends a retry backoff gives DEADLINE_EXCEEDED whose details
    count the attempts (grammatically) and keep the last attempt's status. The server
    asks for a 5 s delay (pushback): the policy's own backoff is uniform in [0, 5 s]
    (gRFC A6), so it would retry before the deadline in 6 % of runs."""
    flaky = Flaky(failures=5, pushback="5000")
    with trio.fail_after(LIMIT):
        async with (
            serving(flaky) as port,
            grpc.open_channel(
                f"127.0.0.1:{port}", backoff=FAST, service_config=_retry_config("5s")
            ) as channel,
        ):
            channel.get_state(try_to_connect=True)
            while channel.get_state() is not ConnectivityState.READY:
                await channel.wait_for_state_change(channel.get_state())
            with pytest.raises(grpc.RpcError) as info:
                await channel.unary_unary("/t.T/Echo")(b"x", timeout=0.3)
    assert info.value.code == grpc.StatusCode.DEADLINE_EXCEEDED
    assert info.value.details == (
        "Deadline Exceeded during the backoff after 1 attempt (last: UNAVAILABLE 'busy')"
    )
    assert flaky.attempts == 1


# -- 9: options that do not apply to the form chosen


@pytest.mark.parametrize(
    ("options", "match"),
    [
        ({"service_config": {"loadBalancingConfig": [{"round_robin": {}}]}}, "round_robin"),
        ({"service_config": {"healthCheckConfig": {"serviceName": ""}}}, "healthCheckConfig"),
        ({"backoff": FAST}, "backoff="),
        ({"resolver": _loopback}, "resolver="),
        ({"dns_refresh_interval": 1.0}, "dns_refresh_interval="),
    ],
    ids=["round_robin", "health", "backoff", "resolver", "dns_refresh"],
)
def test_target_only_options_are_refused_on_the_host_port_form(
    options: dict[str, Any], match: str
) -> None:
    """open_channel(host, port) refuses an option only a target channel uses, with
    ValueError naming the target string to write instead."""
    with pytest.raises(ValueError, match=match) as info:
        grpc.open_channel("127.0.0.1", 50051, **options)
    assert "open_channel('127.0.0.1:50051')" in str(info.value)


def test_options_are_type_checked_on_both_forms() -> None:
    """A wrong backoff, lb policy or connect_timeout raises the same on both forms;
    a target string with a separate port is a ValueError."""
    for args in (("127.0.0.1:1",), ("127.0.0.1", 1)):
        with pytest.raises(TypeError, match="ConnectionBackoff"):
            grpc.open_channel(*args, backoff={"bogus": 1})  # type: ignore[arg-type]
        with pytest.raises(ValueError, match="no supported policy"):
            grpc.open_channel(*args, service_config={"loadBalancingConfig": [{"grpclb": {}}]})
        with pytest.raises(ValueError, match="connect_timeout"):
            grpc.open_channel(*args, connect_timeout=0)
        with pytest.raises(TypeError, match="connect_timeout"):
            grpc.open_channel(*args, connect_timeout="1")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="takes no separate port"):
        grpc.open_channel("ipv4:127.0.0.1:50051", 50051)
    with pytest.raises(ValueError, match="takes no separate port"):
        grpc.open_channel("127.0.0.1:50051", 50051)


@contextlib.contextmanager
def hanging_port() -> Any:
    """A loopback port whose listener's backlog is full: connects to it hang."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(0)
    fillers: list[socket.socket] = []
    try:
        for _ in range(4):
            s = socket.socket()
            s.setblocking(False)
            with contextlib.suppress(BlockingIOError, OSError):
                s.connect(listener.getsockname())
            fillers.append(s)
        yield listener.getsockname()[1]
    finally:
        for s in fillers:
            s.close()
        listener.close()


SHORT = grpc.ConnectionBackoff(initial_backoff=0.05, max_backoff=0.05)


async def test_connect_timeout_bounds_a_target_channels_connects() -> None:
    """connect_timeout on a target channel is its subchannels' min_connect_timeout:
    connects that hang (a listener whose backlog is full) fail within it, again and
    again, instead of after grpc's default 20 s."""
    with trio.fail_after(LIMIT), hanging_port() as port:
        async with grpc.open_channel(
            f"127.0.0.1:{port}", backoff=SHORT, connect_timeout=0.2
        ) as channel:
            # Each failed connect is two subchannel changes (TRANSIENT_FAILURE,
            # CONNECTING); with grpc's 20 s default there would be none here.
            changes = 0
            with trio.move_on_after(1.5):
                while True:
                    await channel.wait_for_subchannel_change()
                    changes += 1
            assert changes >= 3


async def test_a_state_waiter_sees_a_transient_failure_that_lasts_no_checkpoint() -> None:
    """A loop on wait_for_state_change sees TRANSIENT_FAILURE even when the
    subchannel goes CONNECTING again before the waiter runs (connect longer than
    the backoff)."""
    with trio.fail_after(LIMIT), hanging_port() as port:
        async with grpc.open_channel(
            f"127.0.0.1:{port}", backoff=SHORT, connect_timeout=0.2
        ) as channel:
            state = channel.get_state()
            seen = [state]
            while state is not ConnectivityState.TRANSIENT_FAILURE:
                state = await channel.wait_for_state_change(state)
                seen.append(state)
            assert ConnectivityState.CONNECTING in seen


# -- 10: messages


def test_an_empty_retryable_status_code_list_says_empty() -> None:
    """retryableStatusCodes: [] is refused as 'not an empty list'."""
    config = _retry_config()
    config["methodConfig"][0]["retryPolicy"]["retryableStatusCodes"] = []
    with pytest.raises(ValueError, match="not an empty list"):
        grpc.parse_service_config(config)


@pytest.mark.parametrize(
    ("target", "match"),
    [
        ("unix-abstract:foo", "'unix-abstract' is an unknown scheme.*dns:, ipv4:, ipv6:, unix:"),
        ("foo:bar:baz", "not host:port, and 'foo' is not a known scheme"),
        ("fe80::1:50051", "IPv6 address with a port goes in brackets"),
    ],
)
def test_target_messages_name_the_right_mistake(target: str, match: str) -> None:
    """An unsupported scheme lists the supported ones; the IPv6 hint is only given
    for what could be an IPv6 address."""
    with pytest.raises(ValueError, match=match):
        grpc.parse_target(target)


async def test_entering_one_open_channel_twice_is_a_runtime_error() -> None:
    """Entering the same open_channel(...) object a second time is a RuntimeError
    saying to call open_channel again."""
    flaky = Flaky(failures=0)
    with trio.fail_after(LIMIT):
        async with serving(flaky) as port:
            opener = grpc.open_channel("127.0.0.1", port)
            async with opener:
                pass
            with pytest.raises(RuntimeError, match="entered already"):
                async with opener:
                    pass  # pragma: no cover
