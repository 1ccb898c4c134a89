"""grpcio with grpcio's generated code, for ``test_stubs.py`` and ``test_health.py``.

``python stubs_peer.py GENDIR server`` serves ``stubs.v1.Routes`` with grpcio on a
free 127.0.0.1 port, prints ``port N``, and runs until its stdin closes.
``python stubs_peer.py GENDIR client PORT`` calls ``stubs.v1.Routes`` with grpcio's
generated stub. ``python stubs_peer.py - health PORT`` calls ``grpc.health.v1.Health``
with grpcio-health-checking's stub: it prints ``watching`` after the first Watch
message for service "later" and waits for the next. Each check prints ``ok NAME``
(exit status 0 only if all pass). GENDIR holds ``routes_pb2`` and
``routes_pb2_grpc`` (grpcio-tools' ``--grpc_python_out``).
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from concurrent import futures
from typing import Any

import grpc

if sys.argv[1] != "-":
    sys.path.insert(0, sys.argv[1])
    import routes_pb2  # type: ignore[import-not-found]
    import routes_pb2_grpc  # type: ignore[import-not-found]

    class Routes(routes_pb2_grpc.RoutesServicer):  # type: ignore[misc]
        def Double(self, request: Any, context: Any) -> Any:
            return routes_pb2.Point(x=2 * request.x, y=2 * request.y)

        def Expand(self, request: Any, context: Any) -> Iterator[Any]:
            for i in range(request.x):
                yield routes_pb2.Point(x=i, y=request.y)

        def Sum(self, request_iterator: Any, context: Any) -> Any:
            points = list(request_iterator)
            return routes_pb2.Summary(count=len(points), total=sum(p.x for p in points))

        def Swap(self, request_iterator: Any, context: Any) -> Iterator[Any]:
            for p in request_iterator:
                yield routes_pb2.Point(x=p.y, y=p.x)


failures = 0


def check(name: str, ok: bool, got: object) -> None:
    global failures
    print(f"ok {name}" if ok else f"FAIL {name}: {got!r}", flush=True)
    failures += not ok


def serve() -> None:
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    routes_pb2_grpc.add_RoutesServicer_to_server(Routes(), server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    print(f"port {port}", flush=True)
    sys.stdin.read()
    server.stop(0)


def client(port: int) -> None:
    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        routes = routes_pb2_grpc.RoutesStub(channel)
        got: Any = routes.Double(routes_pb2.Point(x=3, y=4), timeout=10)
        check("double", (got.x, got.y) == (6, 8), got)
        got = [(p.x, p.y) for p in routes.Expand(routes_pb2.Point(x=3, y=7), timeout=10)]
        check("expand", got == [(0, 7), (1, 7), (2, 7)], got)
        got = routes.Sum(iter([routes_pb2.Point(x=i) for i in range(5)]), timeout=10)
        check("sum", (got.count, got.total) == (5, 10), got)
        got = [(p.x, p.y) for p in routes.Swap(iter([routes_pb2.Point(x=1, y=2)]), timeout=10)]
        check("swap", got == [(2, 1)], got)
        try:
            routes.Missing(routes_pb2.Point(), timeout=10)
            check("missing", False, "no error")
        except grpc.RpcError as exc:
            check("missing", exc.code() == grpc.StatusCode.UNIMPLEMENTED, exc.code())


def health(port: int) -> None:
    from grpc_health.v1 import health_pb2, health_pb2_grpc

    serving = health_pb2.HealthCheckResponse.SERVING
    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        stub = health_pb2_grpc.HealthStub(channel)
        got: Any = stub.Check(health_pb2.HealthCheckRequest(service=""), timeout=10)
        check("check-server", got.status == serving, got)
        got = stub.Check(health_pb2.HealthCheckRequest(service="routes"), timeout=10)
        check("check-routes", got.status == health_pb2.HealthCheckResponse.NOT_SERVING, got)
        try:
            stub.Check(health_pb2.HealthCheckRequest(service="nope"), timeout=10)
            check("check-unknown", False, "no error")
        except grpc.RpcError as exc:
            check("check-unknown", exc.code() == grpc.StatusCode.NOT_FOUND, exc.code())
        watch = stub.Watch(health_pb2.HealthCheckRequest(service="later"), timeout=20)
        got = next(watch)
        unknown = health_pb2.HealthCheckResponse.SERVICE_UNKNOWN
        check("watch-unknown", got.status == unknown, got)
        print("watching", flush=True)
        got = next(watch)
        check("watch-update", got.status == serving, got)
        watch.cancel()


if __name__ == "__main__":
    if sys.argv[2] == "server":
        serve()
    else:
        (client if sys.argv[2] == "client" else health)(int(sys.argv[3]))
        raise SystemExit(1 if failures else 0)
