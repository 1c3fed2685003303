"""evaluate/estimator layer."""

from __future__ import annotations

__all__: list[str] = []
