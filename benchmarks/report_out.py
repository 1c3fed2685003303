"""The ``--out`` argument of the benchmark scripts that write a report under ``benchmarks/results``."""

from __future__ import annotations

import argparse
from pathlib import Path


def report_name(value: str) -> str:
    """argparse ``type`` of ``--out``: a plain file name (no directory, not hidden), else a one-line usage error."""
    if not value or Path(value).name != value or value.startswith("."):
        raise argparse.ArgumentTypeError(f"a plain file name under benchmarks/results, got {value!r}")
    return value
