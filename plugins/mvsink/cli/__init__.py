"""The ``mvsink`` command line (``mvsink refresh|read|changes|status|compact|vacuum|gc|connect-server``)."""

from __future__ import annotations

from mvsink.cli.app import build_parser, main

__all__ = ["build_parser", "main"]
