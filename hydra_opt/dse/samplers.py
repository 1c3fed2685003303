"""Samplers by name: any Optuna sampler, with constraints wired for the dashboard and per-worker seeds.

``sampler: {name: tpe, args: {...}}`` in a study YAML selects a sampler. Short names (:data:`ALIASES`) or any class
name exported by :mod:`optuna.samplers` (``"CmaEsSampler"``) are accepted; ``args`` are checked against the
class's signature so a typo is a located error, not a crash mid-study.

Constraints: optuna-dashboard 0.21 greys infeasible trials using the trial system attribute ``"constraints"`` that
Optuna's samplers write from ``constraints_func`` (``optuna.samplers._base._process_constraints_after_trial``); it
does *not* read the per-key attributes written by ``Trial.set_constraint``. So the study's constraint vector is
stored by the objective as the user attribute ``constraints`` and returned by :func:`constraints_from_user_attrs`,
which is passed as ``constraints_func`` to samplers that take it (TPE, NSGA-II/III, GP). Samplers without that
argument (random, QMC, grid, brute force) are wrapped in :class:`ConstraintRecordingSampler`, which records the
same attribute after each trial, so every sampler produces the same storage content.

Seeds: :func:`worker_seed` derives a distinct, reproducible seed for each worker from the study seed, the worker's
index and the number of trials already in storage when the run started (so a resumed run does not replay the
proposals of the first run).
"""

from __future__ import annotations

import inspect
import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import optuna
from optuna.distributions import BaseDistribution
from optuna.samplers import BaseSampler
from optuna.study import Study
from optuna.trial import FrozenTrial, TrialState

from hydra_opt.config import ConfigError

__all__ = [
    "ALIASES",
    "SamplerSpec",
    "make_sampler",
    "worker_seed",
    "constraints_from_user_attrs",
    "ConstraintRecordingSampler",
    "WrappedSampler",
    "CONSTRAINTS_ATTR",
]

#: User attribute holding the constraint vector (≤ 0 everywhere = feasible).
CONSTRAINTS_ATTR = "constraints"

#: Short sampler names → class names in :mod:`optuna.samplers`.
ALIASES: dict[str, str] = {
    "tpe": "TPESampler",
    "nsga2": "NSGAIISampler",
    "nsgaii": "NSGAIISampler",
    "nsga3": "NSGAIIISampler",
    "nsgaiii": "NSGAIIISampler",
    "gp": "GPSampler",
    "qmc": "QMCSampler",
    "random": "RandomSampler",
    "grid": "GridSampler",
    "bruteforce": "BruteForceSampler",
    "cmaes": "CmaEsSampler",
}


class SamplerSpec:
    """A sampler choice from a study file.

    Args:
        name: Alias or class name.
        args: Keyword arguments for the class (``seed`` and ``constraints_func`` are set by hydra_opt).
        file: File name for error messages.
        key: Key path for error messages.
    """

    def __init__(self, name: str = "tpe", args: Mapping[str, Any] | None = None, *, file: str | None = None, key: str = "sampler") -> None:
        self.name = name
        self.args = dict(args or {})
        self.file = file
        self.key = key
        self.cls = self._resolve()
        self._check_dependencies()
        self._check_args()

    def _resolve(self) -> type[BaseSampler]:
        cls_name = ALIASES.get(self.name.lower(), self.name)
        cls = getattr(optuna.samplers, cls_name, None)
        if not (inspect.isclass(cls) and issubclass(cls, BaseSampler)):
            raise ConfigError(
                f"is not an Optuna sampler; use one of: {', '.join(sorted(set(ALIASES)))} or a class name from "
                "optuna.samplers",
                file=self.file,
                key=f"{self.key}.name",
                value=self.name,
            )
        return cls

    def _check_dependencies(self) -> None:
        import importlib.util

        if self.cls.__name__ == "GPSampler" and importlib.util.find_spec("torch") is None:
            raise ConfigError("needs PyTorch (pip install torch)", file=self.file, key=f"{self.key}.name",
                              value=self.name)
        if self.cls.__name__ == "CmaEsSampler" and importlib.util.find_spec("cmaes") is None:
            raise ConfigError("needs the cmaes package (pip install cmaes)", file=self.file, key=f"{self.key}.name",
                              value=self.name)

    def _check_args(self) -> None:
        params = inspect.signature(self.cls.__init__).parameters
        accepts_kwargs = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())
        for k in self.args:
            if k in ("seed", "constraints_func", "search_space"):
                raise ConfigError(
                    "is set by hydra_opt (seed: study seed / --seed; constraints: objectives; grid: search space)",
                    file=self.file,
                    key=f"{self.key}.args.{k}",
                )
            if k not in params and not accepts_kwargs:
                allowed = sorted(p for p in params if p not in ("self", "seed", "constraints_func", "search_space"))
                raise ConfigError(
                    f"is not an argument of {self.cls.__name__}; allowed: {', '.join(allowed)}",
                    file=self.file,
                    key=f"{self.key}.args.{k}",
                )

    @property
    def takes_constraints(self) -> bool:
        return "constraints_func" in inspect.signature(self.cls.__init__).parameters

    @property
    def is_grid(self) -> bool:
        return self.cls is optuna.samplers.GridSampler

    @property
    def needs_static_space(self) -> bool:
        """Samplers that model a fixed search space (prefer the ``stick_breaking`` composition encoding)."""
        return self.cls.__name__ in ("NSGAIISampler", "NSGAIIISampler", "GPSampler", "QMCSampler", "CmaEsSampler")


def constraints_from_user_attrs(trial: FrozenTrial) -> Sequence[float]:
    """``constraints_func`` for Optuna samplers: the trial's ``constraints`` user attribute (empty if none)."""
    return tuple(float(c) for c in trial.user_attrs.get(CONSTRAINTS_ATTR, ()))


class WrappedSampler(BaseSampler):
    """A sampler that hands every call to ``inner``; subclasses override the calls they add to.

    Args:
        inner: The wrapped sampler.
    """

    def __init__(self, inner: BaseSampler) -> None:
        self._inner = inner

    @property
    def inner(self) -> BaseSampler:
        """The wrapped sampler."""
        return self._inner

    def __getattr__(self, name: str) -> Any:  # delegate anything else (e.g. GridSampler.is_exhausted)
        if name == "_inner":  # not yet set (unpickling, copy): no recursion
            raise AttributeError(name)
        return getattr(self._inner, name)

    def infer_relative_search_space(self, study: Study, trial: FrozenTrial) -> dict[str, BaseDistribution]:
        return self._inner.infer_relative_search_space(study, trial)

    def sample_relative(self, study: Study, trial: FrozenTrial, search_space: dict[str, BaseDistribution]) -> dict[str, Any]:
        return self._inner.sample_relative(study, trial, search_space)

    def sample_independent(self, study: Study, trial: FrozenTrial, param_name: str, param_distribution: BaseDistribution) -> Any:
        return self._inner.sample_independent(study, trial, param_name, param_distribution)

    def before_trial(self, study: Study, trial: FrozenTrial) -> None:
        self._inner.before_trial(study, trial)

    def after_trial(self, study: Study, trial: FrozenTrial, state: TrialState, values: Sequence[float] | None) -> None:
        self._inner.after_trial(study, trial, state, values)

    def reseed_rng(self) -> None:
        self._inner.reseed_rng()


class ConstraintRecordingSampler(WrappedSampler):
    """Wrap a sampler without ``constraints_func`` so finished trials still get the ``constraints`` system attr.

    Args:
        inner: The wrapped sampler.
        constraints_func: Called on COMPLETE and PRUNED trials, as Optuna's own samplers do.
    """

    def __init__(self, inner: BaseSampler, constraints_func: Callable[[FrozenTrial], Sequence[float]]) -> None:
        super().__init__(inner)
        self._constraints_func = constraints_func

    def after_trial(self, study: Study, trial: FrozenTrial, state: TrialState, values: Sequence[float] | None) -> None:
        self._inner.after_trial(study, trial, state, values)
        # The same code path Optuna's constrained samplers use, so the dashboard sees identical attributes.
        from optuna.samplers._base import _process_constraints_after_trial

        _process_constraints_after_trial(self._constraints_func, study, trial, state)


def worker_seed(seed: int, worker_index: int, n_existing_trials: int = 0) -> int:
    """A 32-bit seed for one worker, distinct across workers and across resumed runs, reproducible."""
    ss = np.random.SeedSequence([int(seed) & 0xFFFFFFFF, int(worker_index), int(n_existing_trials)])
    return int(ss.generate_state(1, dtype=np.uint32)[0])


def make_sampler(spec: SamplerSpec, *, seed: int | None, grid: Mapping[str, Sequence[Any]] | None = None) -> BaseSampler:
    """Instantiate the sampler with ``seed``, the constraints hook and (for grid) the search space."""
    kwargs = dict(spec.args)
    params = inspect.signature(spec.cls.__init__).parameters
    if "seed" in params:
        kwargs["seed"] = seed
    if spec.is_grid:
        if grid is None:
            raise ValueError("the grid sampler needs the search space's grid")
        kwargs["search_space"] = {k: list(v) for k, v in grid.items()}
    if spec.takes_constraints:
        kwargs["constraints_func"] = constraints_from_user_attrs
    with warnings.catch_warnings():
        # constraints_func is deprecated in Optuna 5 in favour of Trial.set_constraint, but optuna-dashboard reads
        # only the attribute constraints_func writes (see the module docstring).
        warnings.simplefilter("ignore", FutureWarning)
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        try:
            sampler = spec.cls(**kwargs)
        except ImportError as exc:
            raise ConfigError(
                f"needs a missing package: {exc}", file=spec.file, key=f"{spec.key}.name", value=spec.name
            ) from None
        except (TypeError, ValueError) as exc:
            raise ConfigError(f"rejected its arguments: {exc}", file=spec.file, key=f"{spec.key}.args") from None
    if not spec.takes_constraints:
        sampler = ConstraintRecordingSampler(sampler, constraints_from_user_attrs)
    return sampler
