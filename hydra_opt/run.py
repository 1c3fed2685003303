"""``python -m hydra_opt.run STUDY.yaml [options]`` — launch or resume a study (same as ``python -m hydra_opt run``)."""

from __future__ import annotations

import sys
from collections.abc import Sequence

from hydra_opt.cli.main import main as _main

__all__ = ["main"]


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``run`` subcommand with ``argv``."""
    args = list(sys.argv[1:] if argv is None else argv)
    return _main(["run", *args])


if __name__ == "__main__":
    raise SystemExit(main())
