"""More than one core: worker processes that share one listening port.

Theory of operation
-------------------
A Trio program runs on one core. hypercorn and grpc-go users scale a machine by
running one server process per core behind one port; on Linux (and the BSDs, macOS)
the kernel does the balancing when every process binds the port with
``SO_REUSEPORT``: it spreads new connections over the listening sockets of the
group (on Linux, by a hash of the connection's addresses). This module has that one
job, in two parts:

- :func:`open_reuse_port_listeners`: ``trio.open_tcp_listeners`` with
  ``SO_REUSEPORT`` set before ``bind`` (``serve_tcp(..., reuse_port=True)``). Where
  the platform has no ``SO_REUSEPORT`` (Windows), it raises an ``OSError`` that says
  so, before anything is bound.
- :func:`supervise`: the supervisor of ``trio-h2t serve --workers N``. It reserves
  the port (a socket bound with ``SO_REUSEPORT`` but never listening: it holds the
  port, ``--port 0`` included, and the kernel hands it no connection), starts N
  workers (``python -m trio_h2t serve --reuse-port --supervised ...``, each its own
  process and its own Trio run, in its own session so a terminal's Ctrl-C reaches
  only the supervisor), and prints ``serving on URL`` once every worker listens.
  A worker that exits while the server runs (a crash, a kill) is restarted, after a
  pause that doubles while restarts keep failing fast (``RESTART_PAUSE`` up to
  ``MAX_RESTART_PAUSE``). On SIGTERM or SIGINT the supervisor sends SIGTERM to every
  worker, which then drains (the two GOAWAYs, its accepted streams finish within
  ``graceful_close_timeout``: docs/keepalive-and-shutdown.md, "The drain") and
  exits; a second signal is passed on too, and stops the workers at once. A worker
  whose supervisor dies sees its stdin (a pipe from the supervisor) reach EOF and
  drains as on SIGTERM.

Why processes started afresh (``python -m``) and not ``fork``: forking a process
that runs Trio (or any thread) copies one thread of it; a fresh interpreter is the
only safe start. It costs an interpreter start-up (a fraction of a second) per
worker, at start and on a restart.
"""

from __future__ import annotations

import errno
import signal
import socket
import subprocess
import sys
from collections.abc import AsyncIterator, Sequence
from typing import Final, TextIO, final

import trio

__all__ = [
    "WorkerStartError",
    "check_reuse_port",
    "open_reuse_port_listeners",
    "reserve_port",
    "supervise",
]

#: Seconds before a crashed worker is restarted; doubled (up to the maximum) while
#: workers keep dying within ``STABLE_AFTER`` seconds of their start.
RESTART_PAUSE: Final = 0.1
MAX_RESTART_PAUSE: Final = 5.0
STABLE_AFTER: Final = 5.0
#: Seconds a worker may take to print its ``serving on`` line.
START_TIMEOUT: Final = 60.0
#: trio's default listen backlog (``trio.open_tcp_listeners``): the largest a uint16
#: holds, which the kernel then caps at its somaxconn.
BACKLOG: Final = 0xFFFF


def check_reuse_port() -> None:
    """Raise ``OSError(ENOPROTOOPT)`` if this platform has no ``SO_REUSEPORT``."""
    if not hasattr(socket, "SO_REUSEPORT"):
        raise OSError(
            errno.ENOPROTOOPT,
            f"SO_REUSEPORT is not available on this platform ({sys.platform}): several"
            " processes cannot share one listening port here; run one process, or put a"
            " load balancer in front of several ports",
        )


async def open_reuse_port_listeners(
    port: int, *, host: str | None = None
) -> list[trio.SocketListener]:
    """``trio.open_tcp_listeners(port, host=host)`` with ``SO_REUSEPORT``: other
    processes (of the same user) may listen on the same port, and the kernel spreads
    new connections over all of them.

    Checkpoint: always. On cancellation: nothing stays bound.

    Raises:
        OSError: the platform has no ``SO_REUSEPORT`` (:func:`check_reuse_port`,
            before anything is bound), or binding failed.
    """
    check_reuse_port()
    addresses = await trio.socket.getaddrinfo(
        host, port, type=trio.socket.SOCK_STREAM, flags=trio.socket.AI_PASSIVE
    )
    listeners: list[trio.SocketListener] = []
    try:
        for family, type_, proto, _, sockaddr in addresses:
            sock = trio.socket.socket(family, type_, proto)
            try:
                sock.setsockopt(trio.socket.SOL_SOCKET, trio.socket.SO_REUSEADDR, 1)
                sock.setsockopt(trio.socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
                if family == trio.socket.AF_INET6:
                    sock.setsockopt(trio.socket.IPPROTO_IPV6, trio.socket.IPV6_V6ONLY, 1)
                await sock.bind(sockaddr)
                sock.listen(BACKLOG)
            except BaseException:
                sock.close()
                raise
            listeners.append(trio.SocketListener(sock))
    except BaseException:
        for listener in listeners:
            listener.socket.close()
        raise
    return listeners


def reserve_port(host: str, port: int) -> socket.socket:
    """A socket bound to ``host``:``port`` with ``SO_REUSEPORT``, never listening: it
    holds the port (``port`` 0 picks one: ``getsockname()`` says which) for workers
    that bind it with ``SO_REUSEPORT`` too, and receives no connection itself.

    Raises:
        OSError: no ``SO_REUSEPORT`` here, or binding failed.
    """
    check_reuse_port()
    family, type_, proto, _, sockaddr = socket.getaddrinfo(
        host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
    )[0]
    sock = socket.socket(family, type_, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        sock.bind(sockaddr)
    except BaseException:
        sock.close()
        raise
    return sock


class WorkerStartError(OSError):
    """A worker exited before it listened (its own message is on stderr)."""


@final
class _Supervisor:
    """The state of one ``supervise`` run. Owner of every field: the supervisor's
    tasks (one Trio run; each change between two awaits)."""

    def __init__(self, command: Sequence[str], workers: int, log: TextIO) -> None:
        self.command = list(command)  # immutable after init
        self.workers = workers  # immutable after init
        self.log = log  # immutable after init
        self.stopping = False  # set once, by the first signal
        self.processes: dict[int, trio.Process] = {}  # slot -> its running worker
        self.exit_codes: dict[int, int] = {}  # slot -> its last worker's status, once stopped
        self.restarts = 0
        self.all_exited = trio.Event()  # set once every worker exited while stopping

    def say(self, text: str) -> None:
        print(f"trio-h2t: {text}", file=self.log, flush=True)

    async def start_worker(self, slot: int) -> trio.Process:
        """Start the worker of ``slot`` and wait until it listens.

        Checkpoint: always. On cancellation: the worker is killed.

        Raises:
            WorkerStartError: it exited (or closed its stdout) before listening.
        """
        proc = await trio.lowlevel.open_process(
            self.command,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            start_new_session=True,
        )
        try:
            assert proc.stdout is not None
            line = b""
            with trio.fail_after(START_TIMEOUT):
                while not line.endswith(b"\n"):
                    chunk = await proc.stdout.receive_some(1)
                    if not chunk:
                        break
                    line += chunk
            if not line.startswith(b"serving on "):
                await proc.wait()
                raise WorkerStartError(
                    errno.ECHILD,
                    f"worker {slot} (pid {proc.pid}) exited with status"
                    f" {proc.returncode} before it listened",
                )
        except BaseException:
            if proc.returncode is None:
                proc.kill()
            with trio.CancelScope(shield=True):
                await proc.wait()
            raise
        self.processes[slot] = proc
        self.say(f"worker {slot} (pid {proc.pid}) listening")
        return proc

    async def run_slot(self, slot: int, proc: trio.Process) -> None:
        """Keep ``slot``'s worker running until the supervisor stops: restart it
        when it exits. Returns once a worker exited while stopping.

        Checkpoint: always. On cancellation: the current worker is killed.
        """
        pause = RESTART_PAUSE
        while True:
            started = trio.current_time()
            try:
                await proc.wait()
            finally:
                if proc.returncode is None:  # cancelled: never leave it running
                    proc.kill()
            code = proc.returncode
            assert code is not None
            if self.stopping:
                self.exit_codes[slot] = code
                self.processes.pop(slot, None)
                if len(self.exit_codes) == self.workers:
                    self.all_exited.set()
                return
            self.say(f"worker {slot} (pid {proc.pid}) exited with status {code}; restarting")
            if trio.current_time() - started < STABLE_AFTER:
                await trio.sleep(pause)
                pause = min(2 * pause, MAX_RESTART_PAUSE)
            else:
                pause = RESTART_PAUSE
            while True:
                try:
                    proc = await self.start_worker(slot)
                except WorkerStartError as exc:
                    self.say(f"{exc.strerror}; retrying in {pause:g} s")
                    await trio.sleep(pause)
                    pause = min(2 * pause, MAX_RESTART_PAUSE)
                    continue
                break
            self.restarts += 1
            if self.stopping:  # a signal came while it started: pass it on
                proc.send_signal(signal.SIGTERM)

    async def pass_signals_on(self, signals: AsyncIterator[int]) -> None:
        """SIGTERM every worker on each SIGTERM or SIGINT we receive: the first makes
        them drain, a second stops them at once. Checkpoint: always."""
        async for signum in signals:
            name = signal.Signals(signum).name
            if not self.stopping:
                self.stopping = True
                self.say(f"{name}: draining every worker (SIGTERM)")
            else:
                self.say(f"{name} again: stopping every worker at once")
            for proc in self.processes.values():
                if proc.returncode is None:
                    proc.send_signal(signal.SIGTERM)


async def supervise(
    command: Sequence[str],
    workers: int,
    *,
    url: str,
    log: TextIO | None = None,
    task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
) -> int:
    """Run ``workers`` copies of the worker ``command`` until SIGTERM or SIGINT.

    ``command`` must start a server that binds with ``SO_REUSEPORT``, prints one
    ``serving on ...`` line on stdout once it listens, drains and exits 0 on SIGTERM
    (stops at once on a second one), and drains on EOF of its stdin (``trio-h2t serve
    --reuse-port --supervised``). Prints ``serving on {url}`` when every worker
    listens, then reports to ``task_status``. A worker that exits while serving is
    restarted; the events go to ``log`` (stderr by default), one line each.

    Returns 0 if every worker exited 0 after the signal, else 1. Checkpoint: always.
    On cancellation: every worker is killed (no drain: send the supervisor SIGTERM
    for one).

    Raises:
        WorkerStartError: a worker exited before it listened, at start (the others
            are killed).
    """
    sup = _Supervisor(command, workers, sys.stderr if log is None else log)
    with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
        async with trio.open_nursery() as nursery:
            try:
                async with trio.open_nursery() as starting:
                    for slot in range(workers):
                        starting.start_soon(sup.start_worker, slot)
            except BaseException:
                for proc in sup.processes.values():
                    proc.kill()
                    with trio.CancelScope(shield=True):
                        await proc.wait()
                raise
            for slot, proc in sup.processes.items():
                nursery.start_soon(sup.run_slot, slot, proc)
                nursery.start_soon(_forward_output, proc)
            print(f"serving on {url}", flush=True)
            sup.say(f"{workers} worker processes share the port (SO_REUSEPORT)")
            task_status.started()
            nursery.start_soon(sup.pass_signals_on, signals)
            await sup.all_exited.wait()
            nursery.cancel_scope.cancel()
    codes = sup.exit_codes
    return 0 if len(codes) == workers and not any(codes.values()) else 1


async def _forward_output(proc: trio.Process) -> None:
    """Copy what a worker writes on stdout after its first line to ours (there is
    normally nothing: an unread pipe would block a worker that writes). Returns at EOF.
    """
    assert proc.stdout is not None
    while data := await proc.stdout.receive_some():
        sys.stdout.write(data.decode(errors="replace"))
        sys.stdout.flush()
