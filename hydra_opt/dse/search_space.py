"""Search spaces as Optuna parameters: a trial → a design dict, and a design dict → the trial parameters.

The grammar of a ``search_spaces/*.yaml`` file (composition, scalar and DynaCore dimensions, counting and
enumeration) is :mod:`hydra_opt.system.space_spec`; :class:`SearchSpace` adds how a study draws its points. The
composition is sampled *conditionally*, so no trial is wasted on an impossible composition: the parts are drawn one
after the other, each from the values that still let the remaining parts reach the slot total exactly
(:meth:`~hydra_opt.system.space_spec.Composition.choices`). The last part takes what is left. Three encodings:

- ``conditional`` (default): integer parameters ``n_mem``, ``n_<chiplet>`` whose ranges depend on the earlier
  draws (readable in the dashboard; best with TPE / random);
- ``stick_breaking``: static float parameters ``u_<part>`` in [0, 1) mapped to the same conditional choice
  (a fixed search space, needed by samplers that model a static space: NSGA-II/III crossover, GP, QMC);
- ``enumerated``: one integer ``composition_index`` over the enumerated compositions (grid / exhaustive runs).

Scalar dimensions are integer steps for ordered integer progressions and categoricals otherwise. The result of
:meth:`SearchSpace.suggest` is a plain *design dict* in the ``DesignPoint`` YAML form (see
``hydra_opt.system.design``); the study turns it into a ``DesignPoint``.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import optuna

from hydra_opt.config import Node, load_yaml
from hydra_opt.system.space_spec import (
    ENCODINGS,
    Composition,
    Part,
    ScalarDim,
    SpaceSpec,
    design_key,
    parse_space_spec,
)

__all__ = [
    "SearchSpace",
    "load_search_space",
    "parse_search_space",
    "suggest_scalar",
    "suggest_composition",
    "composition_params",
]


def suggest_scalar(dim: ScalarDim, trial: optuna.trial.BaseTrial) -> Any:
    """Draw a value of ``dim``: integer steps for ordered integer progressions, a categorical otherwise."""
    if dim.fixed:
        return dim.values[0]
    ir = dim.int_range()
    if ir is not None:
        return trial.suggest_int(dim.param, ir[0], ir[1], step=ir[2])
    labels = dim.labels()
    return dim.values[labels.index(trial.suggest_categorical(dim.param, labels))]


def _scalar_param(dim: ScalarDim, value: Any) -> Any:
    """The parameter value under which :func:`suggest_scalar` returns ``value`` (its inverse)."""
    return value if dim.int_range() is not None else dim.labels()[dim.values.index(value)]


def _scalar_distribution(dim: ScalarDim) -> optuna.distributions.BaseDistribution | None:
    """The Optuna distribution :func:`suggest_scalar` uses (None when fixed)."""
    if dim.fixed:
        return None
    ir = dim.int_range()
    if ir is not None:
        return optuna.distributions.IntDistribution(ir[0], ir[1], step=ir[2])
    return optuna.distributions.CategoricalDistribution(dim.labels())


def _even_step(options: Sequence[int]) -> int | None:
    """The common step of ``options`` (ascending ints, at least two) when they are evenly spaced, else None."""
    step = options[1] - options[0]
    return step if all(b - a == step for a, b in zip(options, options[1:])) else None


def _suggest_from(trial: optuna.trial.BaseTrial, name: str, options: Sequence[int]) -> int:
    """Suggest one of ``options`` (ascending ints): an int range when they are evenly spaced, else an index."""
    if len(options) >= 2:
        step = _even_step(options)
        if step is not None:
            return trial.suggest_int(name, options[0], options[-1], step=step)
        return options[trial.suggest_int(f"{name}_index", 0, len(options) - 1)]
    return options[0]


def suggest_composition(comp: Composition, trial: optuna.trial.BaseTrial, encoding: str) -> tuple[int, ...]:
    """Draw one composition with the given encoding; never an impossible one."""
    if encoding == "enumerated":
        table = comp.table()
        return table[trial.suggest_int("composition_index", 0, len(table) - 1)]
    counts: list[int] = []
    remaining = comp.slots
    for i, part in enumerate(comp.parts):
        options = comp.choices(i, remaining)
        if i == len(comp.parts) - 1 or len(options) == 1:
            v = options[0]  # the last part takes what is left; forced choices need no parameter
        elif encoding == "stick_breaking":
            u = trial.suggest_float(f"u_{part.name}", 0.0, 1.0)
            v = options[min(int(u * len(options)), len(options) - 1)]
        else:
            v = _suggest_from(trial, part.param, options)
        counts.append(v)
        remaining -= v
    return tuple(counts)


def composition_params(comp: Composition, counts: Sequence[int], encoding: str) -> dict[str, Any]:
    """The Optuna parameters under which :func:`suggest_composition` draws ``counts`` (its inverse; stick-breaking
    draws get the middle of the value's interval, so rounding can never move them to a neighbour)."""
    if encoding == "enumerated":
        table = comp.table()
        return {"composition_index": table.index(tuple(counts))} if len(table) > 1 else {}
    params: dict[str, Any] = {}
    remaining = comp.slots
    for i, (part, v) in enumerate(zip(comp.parts, counts)):
        options = comp.choices(i, remaining)
        if not (i == len(comp.parts) - 1 or len(options) == 1):
            j = options.index(v)
            if encoding == "stick_breaking":
                params[f"u_{part.name}"] = (j + 0.5) / len(options)
            elif _even_step(options) is not None:
                params[part.param] = v
            else:
                params[f"{part.param}_index"] = j
        remaining -= v
    return params


@dataclass(frozen=True)
class SearchSpace(SpaceSpec):
    """A parsed search space (:class:`~hydra_opt.system.space_spec.SpaceSpec`) that a study draws designs from."""

    def suggest(self, trial: optuna.trial.BaseTrial) -> dict[str, Any]:
        """Draw one design dict from ``trial`` (composition first, then the scalar dimensions in file order)."""
        counts = suggest_composition(self.composition, trial, self.encoding)
        return self.design(counts, {d.name: suggest_scalar(d, trial) for d in self.scalars})

    def enumerate_params(self) -> Iterator[tuple[dict[str, Any], dict[str, Any]]]:
        """Every ``(design, params)`` in :meth:`~hydra_opt.system.space_spec.SpaceSpec.enumerate`'s order, where ``params`` are the Optuna parameters
        under which :meth:`suggest` draws that design in this space's encoding (e.g. to enqueue it as a trial)."""
        names = [d.name for d in self.scalars]
        for counts in self.composition.enumerate():
            cparams = composition_params(self.composition, counts, self.encoding)
            for combo in itertools.product(*(d.values for d in self.scalars)):
                params = dict(cparams)
                params.update({d.param: _scalar_param(d, v) for d, v in zip(self.scalars, combo) if not d.fixed})
                yield self.design(counts, dict(zip(names, combo))), params

    def grid(self) -> dict[str, list[Any]]:
        """Search space for :class:`optuna.samplers.GridSampler` (``encoding: enumerated`` parameters)."""
        grid: dict[str, list[Any]] = {}
        n = self.composition.count()
        if n > 1:
            grid["composition_index"] = list(range(n))
        for d in self.scalars:
            dist = _scalar_distribution(d)
            if dist is None:
                continue
            if isinstance(dist, optuna.distributions.IntDistribution):
                grid[d.param] = list(range(dist.low, dist.high + 1, dist.step))
            else:
                grid[d.param] = d.labels()
        return grid

    def parameter_names(self) -> list[str]:
        """The names of the Optuna parameters this space may suggest (for documentation and checks)."""
        names: list[str] = []
        parts = self.composition.parts
        if self.encoding == "enumerated":
            names.append("composition_index")
        else:
            for p in parts[:-1]:
                names.append(f"u_{p.name}" if self.encoding == "stick_breaking" else p.param)
        names += [d.param for d in self.scalars if not d.fixed]
        return names


def load_search_space(path: str, *, display: str | None = None) -> SearchSpace:
    """Read and validate a search-space YAML file."""
    return parse_search_space(load_yaml(path, display=display))


def parse_search_space(root: Node) -> SearchSpace:
    """Validate a parsed search-space document (see ``docs/dse.md`` for the schema)."""
    return parse_space_spec(root, cls=SearchSpace)  # type: ignore[return-value]  # built as cls
