"""Real peers against an in-process trio_h2t server (127.0.0.1 only): 103 Early Hints
and 100 Continue as curl and nghttp see them, and what an HTTP/1.1 client gets on
our h2c port. Each peer runs under ``trio.run_process``, bounded by PROC_TIMEOUT."""

from __future__ import annotations

import subprocess
from pathlib import Path

import trio

import trio_h2t
from trio_h2t import H2Stream

from .conftest import PROC_TIMEOUT, tool

HINT = (b"link", b"</style.css>; rel=preload; as=style")


async def handler(stream: H2Stream) -> None:
    """103 Early Hints on /hints; every request's body echoed back (after the
    automatic 100 for ``expect: 100-continue``)."""
    if stream.request.path == "/hints":
        await stream.send_informational([(b":status", b"103"), HINT])
    body = await stream.read_all()
    await stream.send_headers([(b":status", b"200"), (b"content-length", b"%d" % len(body))])
    await stream.send_data(body, end_stream=True)


async def run_peer(*argv: str) -> subprocess.CompletedProcess[bytes]:
    """Run a peer tool to completion; stdout and stderr captured."""
    with trio.fail_after(PROC_TIMEOUT):
        return await trio.run_process(
            list(argv), capture_stdout=True, capture_stderr=True, check=False
        )


async def test_curl_sees_103_early_hints_before_the_200() -> None:
    """curl -v prints the 103 with its link header, then the 200."""
    async with trio_h2t.open_server(handler, 0, host="127.0.0.1") as server:
        url = f"http://127.0.0.1:{server.port}/hints"
        result = await run_peer(tool("curl"), "--http2-prior-knowledge", "-sS", "-v", url)
    err = result.stderr.decode(errors="replace")
    assert result.returncode == 0, err
    assert "< HTTP/2 103" in err
    assert "< link: </style.css>; rel=preload; as=style" in err
    assert err.index("< HTTP/2 103") < err.index("< HTTP/2 200")


async def test_nghttp_sees_103_early_hints() -> None:
    """nghttp -v shows a HEADERS frame with :status 103 before the :status 200 one."""
    async with trio_h2t.open_server(handler, 0, host="127.0.0.1") as server:
        url = f"http://127.0.0.1:{server.port}/hints"
        result = await run_peer(tool("nghttp"), "-v", url)
    out = result.stdout.decode(errors="replace")
    assert result.returncode == 0, out + result.stderr.decode(errors="replace")
    assert out.index(":status: 103") < out.index(":status: 200")


async def test_curl_expect_100_continue_gets_100_then_the_echo(tmp_path: Path) -> None:
    """curl with Expect: 100-continue waits for our automatic 100, then sends its body."""
    body = tmp_path / "body.bin"
    body.write_bytes(b"x" * 50_000)
    async with trio_h2t.open_server(handler, 0, host="127.0.0.1") as server:
        url = f"http://127.0.0.1:{server.port}/upload"
        result = await run_peer(
            tool("curl"),
            "--http2-prior-knowledge",
            "-sS",
            "-v",
            "-H",
            "Expect: 100-continue",
            "--data-binary",
            f"@{body}",
            url,
        )
    err = result.stderr.decode(errors="replace")
    assert result.returncode == 0, err
    assert "< HTTP/2 100" in err
    assert result.stdout == body.read_bytes()


async def test_nghttp_expect_continue_gets_100() -> None:
    """nghttp --expect-continue: the 100 arrives before its DATA and the echo matches."""
    async with trio_h2t.open_server(handler, 0, host="127.0.0.1") as server:
        url = f"http://127.0.0.1:{server.port}/upload"
        with trio.fail_after(PROC_TIMEOUT):
            result = await trio.run_process(
                [tool("nghttp"), "-v", "--expect-continue", "-d", "-", url],
                stdin=b"hello, continue",
                capture_stdout=True,
                capture_stderr=True,
                check=False,
            )
    out = result.stdout.decode(errors="replace")
    assert result.returncode == 0, out + result.stderr.decode(errors="replace")
    assert out.index(":status: 100") < out.index(":status: 200")
    assert "hello, continue" in out


async def test_curl_http11_on_h2c_port_gets_505_saying_so() -> None:
    """curl --http1.1 on our prior-knowledge port gets the 505 and its explanation."""
    async with trio_h2t.open_server(handler, 0, host="127.0.0.1") as server:
        url = f"http://127.0.0.1:{server.port}/"
        result = await run_peer(tool("curl"), "--http1.1", "-sS", "-w", "\\n%{http_code}", url)
        # The server is unharmed: HTTP/2 still works on the same port.
        again = await run_peer(tool("curl"), "--http2-prior-knowledge", "-sS", "-d", "ok", url)
    out = result.stdout.decode(errors="replace")
    assert result.returncode == 0, result.stderr.decode(errors="replace")
    assert out.endswith("\n505")
    assert "HTTP/2 server with prior knowledge" in out
    assert again.stdout == b"ok"
