"""``python -m hydra_opt recover`` — fail stale RUNNING trials (journal storages) and queue their retries.

RDB storages (SQLite, PostgreSQL, MySQL) do this themselves through Optuna's heartbeat. Journal storages (file,
Redis) get hydra_opt's journal heartbeat, and running workers recover dead trials on their own at the end of the
budget; this command is for when no worker is running, or for trials written without a heartbeat.
"""

from __future__ import annotations

import argparse
import math
from typing import Any

from hydra_opt.config import ConfigError

__all__ = ["register", "run"]

#: Default idle time after which a RUNNING trial counts as dead, s (4 default heartbeats).
DEFAULT_OLDER_THAN_S = 120.0


def register(sub: Any) -> argparse.ArgumentParser:
    p = sub.add_parser(
        "recover",
        help="mark stale RUNNING trials of a journal storage as FAIL",
        description=(
            "Mark RUNNING trials with no sign of life (journal heartbeat, else start time) for more than "
            "--older-than seconds as FAIL and queue a WAITING retry with the same design (its system attribute "
            "failed_trial names the failed trial; the next worker runs it). Make sure no live worker runs them: "
            "a trial is only as stale as its last heartbeat."
        ),
    )
    p.add_argument("--storage", metavar="URL", required=True, help="storage URL (journal:///path, redis://..., or RDB)")
    p.add_argument("--study-name", metavar="N", help="study name (default: the only study in the storage)")
    p.add_argument("--older-than", metavar="S", default=str(DEFAULT_OLDER_THAN_S),
                   help=f"idle seconds after which a RUNNING trial is stale (default {DEFAULT_OLDER_THAN_S:g})")
    p.add_argument("--max-retry", metavar="N", default="3", help="retries per original trial (default 3)")
    p.add_argument("--no-retry", action="store_true", help="only mark FAIL, queue no retry")
    p.add_argument("--dry-run", action="store_true", help="list the stale trials, change nothing")
    return p


def _number(value: str, key: str, lo: float, hi: float) -> float:
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise ConfigError(f"is not a number in [{lo:g}, {hi:g}]", file="<cli>", key=key, value=value) from None
    if not math.isfinite(v) or not lo <= v <= hi:
        raise ConfigError(f"must be a finite number in [{lo:g}, {hi:g}]", file="<cli>", key=key, value=value)
    return v


def run(args: argparse.Namespace) -> int:
    from hydra_opt.dse.fault import find_stale_trials, last_alive_s, recover_stale_trials
    from hydra_opt.dse.storages import check_url, redact_url
    from hydra_opt.dse.runner import load_study_by_name

    older = _number(args.older_than, "--older-than", 0.0, 1e8)
    max_retry = int(_number(args.max_retry, "--max-retry", 0, 1000))
    if float(args.max_retry) != max_retry:
        raise ConfigError("is not a whole number", file="<cli>", key="--max-retry", value=args.max_retry)
    check_url(args.storage, file="<cli>", key="--storage")
    name = args.study_name
    if name is not None and (not name.strip() or len(name) > 128 or any(ord(c) < 32 for c in name)):
        raise ConfigError("must be a printable name of 1-128 characters", file="<cli>", key="--study-name", value=name)
    study = load_study_by_name(args.storage, name)
    shown = redact_url(args.storage)
    if args.dry_run:
        import time

        now = time.time()
        stale = find_stale_trials(study, older, now_s=now)
        for t in stale:
            print(f"stale: trial {t.number} idle {now - last_alive_s(t):.0f} s")
        print(f"{len(stale)} stale RUNNING trial(s) idle > {older:g} s in study {study.study_name!r} on {shown} "
              "(dry run: nothing changed)")
        return 0
    done = recover_stale_trials(study, older, max_retry=max_retry, retry=not args.no_retry)
    for r in done:
        retry = f"retry queued as trial {r.retry_number}" if r.retry_number is not None else "no retry queued"
        print(f"trial {r.number}: RUNNING -> FAIL (idle {r.idle_s:.0f} s); {retry}")
    print(f"recovered {len(done)} stale trial(s) idle > {older:g} s in study {study.study_name!r} on {shown}")
    return 0
