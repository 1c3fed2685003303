"""Helpers shared by the HYDRA Fig. 9/10/12 and Table IV reproductions: experiment YAMLs under ``studies/paper/``,
design lookup, memoised simulations (the same design × options run by two experiments is simulated once per
process) and the paper's scores (B*: TP/TTFT, M_T: TP; METHODS §2g).
"""

from __future__ import annotations

import hashlib
import math
import os
import pickle
import statistics
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hydra_opt.config import ConfigError
from hydra_opt.config.reader import load_yaml
from hydra_opt.experiments.paths import ExperimentPaths

__all__ = [
    "OBJ_LABEL",
    "DS_LABEL",
    "load_spec",
    "horizon",
    "sim_options",
    "SimRun",
    "design_path",
    "load_design_cached",
    "simulate_cached",
    "disk_cached",
    "SIM_CACHE_ENV",
    "score",
    "finite_mean",
    "geomean",
    "clear_cache",
    "bar_chart",
    "ratio_cause",
    "safe_ratio",
    "finite_extreme",
    "hbm_port_util",
]

OBJ_LABEL = {"bstar": "B*", "mt": "M_T"}
DS_LABEL = {"arxiv": "ArXiv", "bwb": "BWB", "chat": "Chat", "lw": "LW"}

#: Environment variable naming a folder for the on-disk simulation cache (unset: memory only).
SIM_CACHE_ENV = "HYDRA_OPT_SIM_CACHE"

_SIM_CACHE: dict[tuple, Any] = {}
_CODE_SHA: str | None = None
_DESIGN_CACHE: dict[Path, Any] = {}


def load_spec(key: str, path: str | Path | None = None, paths: ExperimentPaths | None = None, *,
              horizon_s: float | None = None) -> dict:
    """The experiment YAML ``path``, else ``<checkout>/studies/paper/<key>.yaml`` of ``paths`` (default
    :meth:`ExperimentPaths.default`), as a dict (checked: ``kind: paper_experiment``); ``horizon_s`` replaces the
    file's ``horizon_s`` (tests shrink runs with it)."""
    p = Path(path) if path else (paths or ExperimentPaths.default()).paper_dir / f"{key}.yaml"
    node = load_yaml(p)
    data = node.data
    if not isinstance(data, dict) or data.get("kind") != "paper_experiment":
        raise ConfigError("must be a mapping with kind: paper_experiment", file=str(p), key="kind")
    data = dict(data)
    data["_dir"] = p.parent
    if horizon_s is not None:
        data["horizon_s"] = horizon_s
    return data


def load_experiment_file(path: str | Path) -> dict:
    """``python -m hydra_opt validate`` loader of ``kind: paper_experiment`` files (see :func:`load_spec`)."""
    p = Path(path)
    return load_spec(p.stem, p)


def horizon(spec: dict, quick: bool) -> float:
    """Simulated horizon of the experiment, s."""
    h = spec.get("horizon_s", 100.0)
    if isinstance(h, dict):
        h = h["quick" if quick else "full"]
    return float(h)


@dataclass(frozen=True)
class SimRun:
    """One simulated setting of an experiment: the scenario, the engine knobs and design overrides (hashable).

    Attributes:
        scenario: The ``hydra_opt.evaluate.Scenario``.
        options: The ``SimOptions`` (engine knobs); None: the defaults.
        overrides: Sorted ``(design field, value)`` pairs given to every design (``DesignPoint.with_overrides``).
    """

    scenario: Any
    options: Any = None
    overrides: tuple[tuple[str, Any], ...] = field(default=())

    def with_(self, **over: Any) -> SimRun:
        """A copy with ``over`` applied where each key belongs (scenario, engine knob or design override)."""
        import dataclasses

        from hydra_opt.evaluate import SimOptions
        from hydra_opt.system.design import OVERRIDE_KEYS

        over = {k: v for k, v in over.items() if v is not None}
        knobs = {f.name for f in dataclasses.fields(SimOptions)}
        opt = {k: v for k, v in over.items() if k in knobs}
        des = {k: v for k, v in over.items() if k in OVERRIDE_KEYS}
        scn = {k: v for k, v in over.items() if k not in knobs and k not in OVERRIDE_KEYS}
        return SimRun(self.scenario.with_(**scn), (self.options or SimOptions()).with_(**opt) if opt else self.options,
                      tuple(sorted({**dict(self.overrides), **des}.items())))


def sim_options(spec: dict, quick: bool, **over: Any) -> SimRun:
    """The experiment's preset (``paper`` or ``clean``) scenario at its horizon, with ``over`` applied (scenario
    settings, engine knobs and design overrides alike)."""
    from hydra_opt.evaluate import Scenario

    preset = spec.get("preset", "paper")
    if preset not in ("paper", "clean"):
        raise ConfigError("must be paper or clean", file=str(spec.get("_dir", "")), key="preset", value=preset)
    scn = Scenario.paper if preset == "paper" else Scenario
    return SimRun(scn(horizon_s=horizon(spec, quick))).with_(**over)


def design_path(spec: dict, template: str, **fields: str) -> Path:
    """A design YAML path from a template relative to the experiment file."""
    p = (Path(spec["_dir"]) / template.format(**fields)).resolve()
    if not p.is_file():
        raise ConfigError("design file does not exist", file=str(p))
    return p


def load_design_cached(path: Path):
    """``load_design`` once per path."""
    from hydra_opt.system.design import load_design

    if path not in _DESIGN_CACHE:
        _DESIGN_CACHE[path] = load_design(path)
    return _DESIGN_CACHE[path]


def _code_sha() -> str:
    """SHA-256 over every ``hydra_opt/**/*.py`` source except this reproduction package's own modules (which only
    orchestrate and render; its serving simulator ``disagg.py`` is hashed), so a disk-cache entry is valid only for
    the same simulation code."""
    global _CODE_SHA
    if _CODE_SHA is None:
        import hydra_opt

        h = hashlib.sha256()
        pkg = Path(hydra_opt.__file__).resolve().parent
        here = Path(__file__).resolve().parent
        for f in sorted(pkg.rglob("*.py")):
            if f.parent == here and f.name != "disagg.py":
                continue
            h.update(str(f.relative_to(pkg)).encode())
            h.update(f.read_bytes())
        _CODE_SHA = h.hexdigest()
    return _CODE_SHA


def _disk_path(key: tuple) -> Path | None:
    """Disk-cache file of a simulation, or None when ``$HYDRA_OPT_SIM_CACHE`` is unset."""
    root = os.environ.get(SIM_CACHE_ENV)
    if not root:
        return None
    digest = hashlib.sha256(repr(key).encode() + _code_sha().encode()).hexdigest()
    return Path(root) / f"{digest}.pkl"


def disk_cached(key: tuple, compute: Callable[[], Any]) -> Any:
    """``compute()``, kept under ``$HYDRA_OPT_SIM_CACHE`` (when set) by ``key`` and a hash of the package's source.

    Lets a long reproduction be split over processes, or resumed, without re-running a simulation; any source
    change outside this package invalidates every entry. ``key`` must have a ``repr`` that is stable across
    interpreters.
    """
    path = _disk_path(key)
    if path is not None and path.is_file():
        with path.open("rb") as fh:
            return pickle.load(fh)
    value = compute()
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        with tmp.open("wb") as fh:
            pickle.dump(value, fh)
        tmp.replace(path)  # atomic: a concurrent reader never sees half a file
    return value


def simulate_cached(design, model: str, workload: str, options, seed: int = 0):
    """``hydra_opt.evaluate.simulate`` memoised on (design, model, workload, options, seed) for this process,
    and on disk with ``$HYDRA_OPT_SIM_CACHE`` (:func:`disk_cached`)."""
    from hydra_opt.evaluate import simulate

    key = (design, model, workload, options, seed)
    if key not in _SIM_CACHE:
        run = options if isinstance(options, SimRun) else SimRun(options)
        _SIM_CACHE[key] = disk_cached(key, lambda: simulate(
            design.with_overrides(dict(run.overrides)) if run.overrides else design, model, workload, seed=seed,
            scenario=run.scenario, options=run.options))
    return _SIM_CACHE[key]


def clear_cache() -> None:
    """Forget memoised simulations and designs."""
    _SIM_CACHE.clear()
    _DESIGN_CACHE.clear()


def score(throughput_tok_s: float, ttft_s: float, objective: str) -> float:
    """The paper's per-objective score: B* → TP/TTFT ((tok/s)/s), M_T → TP (tok/s); NaN when undefined."""
    if objective == "mt":
        return float(throughput_tok_s)
    if not (ttft_s > 0 and math.isfinite(ttft_s)):
        return math.nan
    return float(throughput_tok_s) / float(ttft_s)


def finite_mean(values) -> float:
    """Arithmetic mean of the finite values (NaN if none)."""
    vals = [v for v in values if math.isfinite(v)]
    return statistics.fmean(vals) if vals else math.nan


def geomean(values) -> float:
    """Geometric mean of positive finite values (NaN if none)."""
    vals = [float(v) for v in values if v is not None and math.isfinite(v) and v > 0]
    if not vals:
        return math.nan
    return math.exp(sum(math.log(v) for v in vals) / len(vals))


def bar_chart(path: Path, groups: list[str], series: dict[str, list[float]], *, title: str, ylabel: str,
              hatched: tuple[str, ...] = (), ref_line: float | None = 1.0) -> None:
    """Grouped bar chart (one group per label, one bar per series) written as PNG.

    Args:
        path: Output PNG.
        groups: Group labels (x axis).
        series: Series name → one value per group (NaN = no bar).
        title, ylabel: Axis texts.
        hatched: Series drawn hatched (e.g. the artifact's values next to ours).
        ref_line: Horizontal reference line (the normalisation baseline), or None.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    n = max(len(series), 1)
    width = 0.8 / n
    x = np.arange(len(groups))
    fig, ax = plt.subplots(figsize=(max(6.0, 0.9 * len(groups) + 2), 3.4))
    for i, (name, vals) in enumerate(series.items()):
        ax.bar(x + (i - (n - 1) / 2) * width, [v if v is not None else np.nan for v in vals], width,
               label=name, hatch="//" if name in hatched else None, edgecolor="black", linewidth=0.4,
               alpha=0.6 if name in hatched else 1.0)
    if ref_line is not None:
        ax.axhline(ref_line, color="black", linewidth=0.8, linestyle="--")
    ax.set_xticks(x)
    ax.set_xticklabels(groups, rotation=30 if len(groups) > 6 else 0, ha="right" if len(groups) > 6 else "center",
                       fontsize=8)
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=7, ncol=min(n, 4))
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def ratio_cause(ours_tp: float, ours_ttft: float, ref_tp: float, ref_ttft: float, objective: str) -> str:
    """A measured decomposition of why a normalised score differs from the artifact's: which term (throughput
    or TTFT ratio) moved, with both sides' values. Ratios are variant/baseline (TP ↑ better, TTFT ↓ better)."""
    parts = [f"ours TP ×{ours_tp:.2f}" + (f", TTFT ×{ours_ttft:.2f}" if objective == "bstar" else ""),
             f"artifact TP ×{ref_tp:.2f}" + (f", TTFT ×{ref_ttft:.2f}" if objective == "bstar" else "")]
    if objective == "bstar" and all(math.isfinite(v) and v > 0 for v in (ours_tp, ours_ttft, ref_tp, ref_ttft)):
        d_tp = abs(math.log(ours_tp / ref_tp))
        d_tt = abs(math.log(ours_ttft / ref_ttft))
        parts.append("the gap is mostly in " + ("TTFT" if d_tt > d_tp else "throughput"))
    return "; ".join(parts)


def safe_ratio(a: float, b: float) -> float:
    """``a / b``, NaN when either is not a finite number or ``b`` is 0 (short runs can produce no token)."""
    try:
        a, b = float(a), float(b)
    except (TypeError, ValueError):
        return math.nan
    if not (math.isfinite(a) and math.isfinite(b)) or b == 0:
        return math.nan
    return a / b


def finite_extreme(table: dict, fn) -> Any:
    """Key of ``fn`` (min or max) over the finite values of ``table`` (the first key if none is finite)."""
    keys = [k for k, v in table.items() if isinstance(v, (int, float)) and math.isfinite(v)]
    if not keys:
        return next(iter(table))
    return fn(keys, key=lambda k: table[k])


def hbm_port_util(result: Any) -> str:
    """``"max%/mean%"`` of a simulation's per-HBM port utilisation (``SimResult.hbm_bw_util``), ``"—"`` if none."""
    u = [float(x) for x in getattr(result, "hbm_bw_util", []) or []]
    return f"{max(u):.0%}/{sum(u) / len(u):.0%}" if u else "—"
