"""``python -m hydra_opt``."""

from __future__ import annotations

from hydra_opt.cli.main import main

raise SystemExit(main())
