"""Launchers that run trio_h2t side by side with other HTTP/2 servers (see ../README.md)."""
