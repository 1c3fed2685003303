"""Reproduction of the HYDRA and DynaCore papers (issue 8): one module per experiment, one report.

Not part of the product: it sits above ``dse/`` and only ``hydra_opt.cli.report_cmd`` (``report --reproduce``)
imports it. Each experiment is ``hydra_opt/experiments/<key>.py`` with
``run(quick, fig_dir, seed=0, *, paths) -> Section`` (:mod:`hydra_opt.experiments.common`; ``paths`` an
:class:`~hydra_opt.experiments.paths.ExperimentPaths` naming the checkout and the shared data folder the experiments
read). :func:`run_reproduction` runs the selected ones, stores each section as ``<out>/reproduction/<key>.json``
(with commit, date, quick flag and wall time), writes the figures next to it and renders ``<out>/reproduction.md``
from *all* stored sections — so experiments can be (re-)run one at a time and the report re-rendered from JSON
(``from_results=True``) without running anything.
"""

from __future__ import annotations

import datetime as _dt
import importlib
import importlib.util
import json
import subprocess
import time
import traceback
from pathlib import Path

from hydra_opt.config import ConfigError
from hydra_opt.experiments.common import Row, Section, render_markdown, section_from_json, section_to_json
from hydra_opt.experiments._hydra_sims import load_experiment_file
from hydra_opt.experiments.paths import ExperimentPaths

__all__ = ["EXPERIMENTS", "TITLES", "ExperimentPaths", "load_experiment_file", "run_reproduction", "run_one",
           "parse_only", "git_commit", "Row", "Section"]

#: Experiment keys in report order.
EXPERIMENTS = ("hydra_fig8", "hydra_table4", "hydra_fig9", "hydra_fig10", "hydra_fig12", "hydra_table5",
               "dynacore", "beyond")

#: Headings used for experiments that have no result yet.
TITLES = {
    "hydra_fig8": "HYDRA Fig. 8 / §VI-B — estimator-selected vs exhaustive Pareto fronts",
    "hydra_table4": "HYDRA Table IV / §VI-C — specialisation vs generality",
    "hydra_fig9": "HYDRA Fig. 9 / §VI-D–E — CP, CP+ET, CP+ET+DB vs RR/static/static",
    "hydra_fig10": "HYDRA Fig. 10 / Fig. 11 — placement (RR, random, CP) and NoI link utilisation",
    "hydra_fig12": "HYDRA Fig. 12 — task schedulers",
    "hydra_table5": "HYDRA Table V / §VI-F — DSE time and throughput recovery",
    "dynacore": "DynaCore §8 — evaluation",
    "beyond": "Beyond the papers — DynaCore chiplets in the HYDRA package search",
}

_FIG_DIR = "reproduction"


def git_commit(short: bool = True) -> str:
    """The checkout's HEAD commit (``+dirty`` is not tracked: other engineers share the tree), or ``unknown``."""
    try:
        args = ["git", "rev-parse", "--short=10" if short else "--verify", "HEAD"]
        out = subprocess.run(args, cwd=Path(__file__).resolve().parent, capture_output=True, text=True, timeout=10)
        return out.stdout.strip() or "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def parse_only(only: str | list[str] | tuple[str, ...] | None) -> tuple[str, ...]:
    """The selected keys in report order (all when ``only`` is None or empty).

    Raises:
        ConfigError: On an unknown key (names the allowed keys).
    """
    if only is None:
        return EXPERIMENTS
    items = [k.strip() for k in (only.split(",") if isinstance(only, str) else only)]
    items = [k for k in items if k]
    if not items:
        raise ConfigError(f"is empty; allowed keys: {', '.join(EXPERIMENTS)}", file="<cli>", key="--only",
                          value=only)
    bad = [k for k in items if k not in EXPERIMENTS]
    if bad:
        raise ConfigError(f"is not an experiment key; allowed keys: {', '.join(EXPERIMENTS)}", file="<cli>",
                          key="--only", value=bad[0])
    return tuple(k for k in EXPERIMENTS if k in items)


def _placeholder(key: str, text: str) -> Section:
    return Section(key=key, title=TITLES.get(key, key), intro_md=text, rows=[], figures=[], quick=True)


def run_one(key: str, quick: bool, fig_dir: Path, seed: int = 0,
            paths: ExperimentPaths | None = None) -> tuple[Section, str | None]:
    """Import ``hydra_opt.experiments.<key>`` lazily and run it (``paths``: default :meth:`ExperimentPaths.default`).

    Returns:
        The section and an error text (None on success). A missing module gives a "not built yet" section; an
        exception inside the experiment gives a section with the error (the other experiments still run).
    """
    name = f"{__name__}.{key}"
    try:
        mod = importlib.import_module(name)
    except ModuleNotFoundError as exc:
        if exc.name == name:
            return _placeholder(key, "*Not built yet* (no module `hydra_opt/experiments/"
                                     f"{key}.py`)."), None
        raise
    t0 = time.perf_counter()
    try:
        section = mod.run(quick=quick, fig_dir=fig_dir, seed=seed, paths=paths or ExperimentPaths.default())
    except Exception as exc:  # noqa: BLE001 — one failing experiment must not lose the others' results
        tb = traceback.format_exc(limit=4)
        sec = _placeholder(key, f"*Failed* in {'quick' if quick else 'full'} mode: `{type(exc).__name__}: "
                                f"{str(exc)[:300]}`")
        sec.wall_s = time.perf_counter() - t0
        sec.quick = quick
        return sec, tb
    if not section.wall_s:
        section.wall_s = time.perf_counter() - t0
    section.quick = quick
    return section, None


def _load(path: Path) -> tuple[Section, dict] | None:
    try:
        data = json.loads(path.read_text())
        return section_from_json(data), dict(data.get("meta", {}))
    except (OSError, ValueError, KeyError, TypeError):
        return None


def run_reproduction(out_dir: str | Path, quick: bool, only: str | list[str] | None = None,
                     from_results: bool = False, seed: int = 0, log=print,
                     failures: list[str] | None = None, paths: ExperimentPaths | None = None) -> Path:
    """Run (or re-render) the reproduction report.

    Args:
        out_dir: Output folder: ``reproduction.md`` goes here, figures and JSON into ``reproduction/``.
        quick: Quick mode (each experiment ≤ ~2 min wall).
        only: Keys to run (comma-separated string or list); the others are rendered from their stored JSON.
        from_results: Run nothing; re-render every stored section.
        seed: Seed passed to every experiment.
        log: Progress printer.
        failures: If given, the keys whose experiment raised are appended to it.
        paths: Input folders (checkout, shared data); default :meth:`ExperimentPaths.default`.

    Returns:
        The path of ``reproduction.md``.

    Raises:
        ConfigError: On an unknown key in ``only``.
    """
    keys = parse_only(only)
    out = Path(out_dir)
    fig_dir = out / _FIG_DIR
    fig_dir.mkdir(parents=True, exist_ok=True)
    commit = git_commit()
    failures = failures if failures is not None else []
    if not from_results:
        for key in keys:
            log(f"[reproduce] {key} ({'quick' if quick else 'full'}) ...")
            section, err = run_one(key, quick, fig_dir, seed=seed, paths=paths)
            if err:
                failures.append(key)
                log(f"[reproduce] {key} FAILED:\n{err}")
            meta = {"commit": commit, "date": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
                    "quick": quick, "wall_s": round(section.wall_s, 1), "seed": seed,
                    "status": "failed" if err else ("not built" if not section.rows and "Not built yet"
                                                    in section.intro_md else "ok")}
            if meta["status"] != "not built":
                (fig_dir / f"{key}.json").write_text(json.dumps(section_to_json(section, **meta), indent=1,
                                                                 allow_nan=False) + "\n")
            log(f"[reproduce] {key}: {meta['status']}, {len(section.rows)} rows, {section.wall_s:.0f} s")
    sections, metas = [], {}
    for key in EXPERIMENTS:
        loaded = _load(fig_dir / f"{key}.json")
        if loaded is None:
            try:
                built = importlib.util.find_spec(f"{__name__}.{key}") is not None
            except (ImportError, ValueError):
                built = False
            text = ("*Not run yet* (no stored result `reproduction/" + key + ".json`; run "
                    f"`python -m hydra_opt report --reproduce --only {key} --out DIR`)." if built else
                    f"*Not built yet* (no module `hydra_opt/experiments/{key}.py`).")
            sections.append(_placeholder(key, text))
        else:
            sections.append(loaded[0])
            metas[key] = loaded[1]
    md = out / "reproduction.md"
    md.write_text(render_markdown(sections, commit, metas, fig_prefix=_FIG_DIR))
    if failures:
        log(f"[reproduce] failed: {', '.join(failures)}")
    return md
