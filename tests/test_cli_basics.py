"""The entry points exist and bad usage exits 2 with the tool's one-line format."""

from __future__ import annotations

import subprocess
import sys


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, timeout=120)


def test_module_help() -> None:
    r = _run("-m", "hydra_opt", "--help")
    assert r.returncode == 0
    assert "simulate" in r.stdout and "estimate" in r.stdout


def test_run_help() -> None:
    r = _run("-m", "hydra_opt.run", "--help")
    assert r.returncode == 0, r.stderr
    assert "STUDY" in r.stdout or "study" in r.stdout.lower()


def test_unknown_subcommand_exits_2() -> None:
    r = _run("-m", "hydra_opt", "no-such-command")
    assert r.returncode == 2
    assert "hydra_opt: error:" in r.stderr
