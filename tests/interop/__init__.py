"""Interop tests: trio_h2t against real HTTP/2 peers (curl, nghttp, nghttpd, h2load)."""
