"""Command-line interface: argument parsing and printing only; the work happens in the layers below."""

from __future__ import annotations

from hydra_opt.cli.main import main

__all__ = ["main"]
