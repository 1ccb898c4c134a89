"""The interop server on several worker processes sharing one port (``--workers``).

The server runs as a subprocess under the transport's supervisor (trio_h2t/_workers.py):
calls over several connections are answered by both workers (UnaryCall's
``server_id`` is the answering process's pid), and a SIGTERM to the supervisor while
calls are in flight drains: those calls get every response, and the supervisor and
its workers exit, within a bound.
"""

from __future__ import annotations

import signal
import subprocess
import sys

import trio

from trio_h2t import grpc
from trio_h2t.interop.protos import messages_pb2

#: Seconds the whole test may take (two interpreter start-ups on a loaded machine).
TIMEOUT = 30.0
#: Seconds the drain may take after SIGTERM (the calls need about 0.9 s).
DRAIN_BOUND = 8.0

UNARY = "/grpc.testing.TestService/UnaryCall"
STREAMING = "/grpc.testing.TestService/StreamingOutputCall"


async def _server_id(port: int) -> str:
    """The pid of the worker that answers one UnaryCall on a new connection."""
    async with grpc.open_channel("127.0.0.1", port) as channel:
        call = channel.unary_unary(
            UNARY,
            request_serializer=messages_pb2.SimpleRequest.SerializeToString,
            response_deserializer=messages_pb2.SimpleResponse.FromString,
        )
        response = await call(messages_pb2.SimpleRequest(fill_server_id=True))
        return str(response.server_id)


async def test_two_workers_answer_and_drain_on_sigterm() -> None:
    """Both workers answer calls on one port; SIGTERM drains the calls in flight, then all exit."""
    command = [sys.executable, "-m", "trio_h2t.interop.server", "--host", "127.0.0.1"]
    command += ["--port", "0", "--workers", "2"]
    proc = await trio.lowlevel.open_process(
        command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, start_new_session=True
    )
    try:
        with trio.fail_after(TIMEOUT):
            assert proc.stdout is not None
            line = b""
            while not line.endswith(b"\n"):
                chunk = await proc.stdout.receive_some(1)
                assert chunk, "the supervisor exited before it served"
                line += chunk
            assert line.startswith(b"serving on http://127.0.0.1:"), line
            port = int(line.rsplit(b":", 1)[1])

            pids = {await _server_id(port) for _ in range(16)}
            assert len(pids) == 2, pids
            assert str(proc.pid) not in pids  # the supervisor serves nothing itself

            first_responses = 0
            all_started = trio.Event()
            counts: list[int] = []

            async def streaming_call() -> None:
                nonlocal first_responses
                async with grpc.open_channel("127.0.0.1", port) as channel:
                    method = channel.unary_stream(
                        STREAMING,
                        request_serializer=messages_pb2.StreamingOutputCallRequest.SerializeToString,
                        response_deserializer=messages_pb2.StreamingOutputCallResponse.FromString,
                    )
                    params = [
                        messages_pb2.ResponseParameters(size=10, interval_us=300_000)
                        for _ in range(3)
                    ]
                    request = messages_pb2.StreamingOutputCallRequest(response_parameters=params)
                    n = 0
                    async with method(request) as call:
                        async for _ in call:
                            n += 1
                            if n == 1:
                                first_responses += 1
                                if first_responses == 4:
                                    all_started.set()
                    counts.append(n)

            async with trio.open_nursery() as nursery:
                for _ in range(4):
                    nursery.start_soon(streaming_call)
                await all_started.wait()
                proc.send_signal(signal.SIGTERM)
                stopped_at = trio.current_time()
            assert counts == [3, 3, 3, 3]
            with trio.fail_after(DRAIN_BOUND):
                await proc.wait()
            assert trio.current_time() - stopped_at < DRAIN_BOUND
            assert proc.returncode == 0
            # The supervisor returns once every worker exited (it reaps them).
            assert not any(_alive(int(pid)) for pid in pids)
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()


def _alive(pid: int) -> bool:
    """True if ``pid`` runs (not a zombie)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except FileNotFoundError:
        return False
