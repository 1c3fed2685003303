"""Shared parsing of the fault-tolerance options of ``run`` (``--heartbeat-interval``, ``--grace-period``,
``--storage-retry``)."""

from __future__ import annotations

import argparse
from typing import Any

from hydra_opt.config import ConfigError

__all__ = ["MAX_GRACE_S", "MAX_HEARTBEAT_S", "storage_options_from_args"]

MAX_HEARTBEAT_S = 3600
MAX_GRACE_S = 7 * 86400


def _int_s(value: str | None, key: str, lo: int, hi: int) -> int | None:
    if value is None:
        return None
    try:
        v = int(value)
    except (TypeError, ValueError):
        raise ConfigError(f"is not a whole number of seconds in [{lo}, {hi}]", file="<cli>", key=key,
                          value=value) from None
    if not lo <= v <= hi:
        why = (" (without heartbeats a dead worker's trial would stay RUNNING for ever; for rare heartbeats give a "
               "large value)") if key == "--heartbeat-interval" and v == 0 else ""
        raise ConfigError(f"must be in [{lo}, {hi}] s{why}", file="<cli>", key=key, value=v)
    return v


def storage_options_from_args(args: argparse.Namespace) -> Any:
    """``StorageOptions`` with the command line's heartbeat settings (Optuna takes whole seconds)."""
    from hydra_opt.dse.storages import StorageOptions

    base = StorageOptions()
    hb = _int_s(getattr(args, "heartbeat_interval", None), "--heartbeat-interval", 1, MAX_HEARTBEAT_S)
    grace = _int_s(getattr(args, "grace_period", None), "--grace-period", 1, MAX_GRACE_S)
    retry = _int_s(getattr(args, "storage_retry", None), "--storage-retry", 0, MAX_GRACE_S)
    hb = base.heartbeat_interval_s if hb is None else hb
    if grace is None:
        grace = max(base.grace_period_s, 4 * hb)
    if hb > 0 and grace <= hb:
        raise ConfigError(f"must exceed the heartbeat interval ({hb} s), or live trials look dead", file="<cli>",
                          key="--grace-period", value=grace)
    return StorageOptions(
        sqlite_timeout_s=base.sqlite_timeout_s, heartbeat_interval_s=hb, grace_period_s=grace,
        failed_trial_retries=base.failed_trial_retries, sqlite_wal=base.sqlite_wal,
        retry_s=base.retry_s if retry is None else float(retry),
    )
