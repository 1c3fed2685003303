"""Registry of configuration-file kinds for ``python -m hydra_opt validate``.

A kind maps to a loader given as a ``"module:function"`` string, imported only when a file of that kind is validated,
so the config layer never imports the layers above it. A loader takes the file path and returns the loaded object or
raises :class:`~hydra_opt.config.ConfigError`.

A file's kind is its top-level ``kind:`` value when present, else the name of its parent folder
(``designs/`` -> ``design``, ``chiplets/`` -> ``chiplet_library``, ...).

Helpers that own a kind register it by adding one line to :data:`KINDS` (and a folder to :data:`FOLDER_KINDS`),
or at run time with :func:`register_kind` — as the CLI does for ``kind: paper_experiment`` files, whose loader lives
above the product (``hydra_opt.experiments``, reached only through ``hydra_opt.cli.report_cmd``).
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hydra_opt.config.errors import ConfigError
from hydra_opt.config.reader import load_yaml

__all__ = ["FOLDER_KINDS", "KINDS", "detect_kind", "loader_for", "register_kind", "validate_file"]

#: kind -> "module:function" loader.
KINDS: dict[str, str] = {
    "design": "hydra_opt.system.feasibility:validate_design_file",
    "chiplet_library": "hydra_opt.hardware.chiplets:validate_library_file",
    "memory": "hydra_opt.hardware.memory:validate_memory_file",
    "search_space": "hydra_opt.dse.search_space:load_search_space",
    "objective": "hydra_opt.evaluate.objectives:load_objectives",
    "study": "hydra_opt.dse.spec:load_study_spec",
    "model": "hydra_opt.workload.models:load_model",
    "workload": "hydra_opt.workload.workload:load_workload",
}

#: parent folder name -> kind (used when a file has no ``kind:`` key).
FOLDER_KINDS: dict[str, str] = {
    "designs": "design",
    "search_spaces": "search_space",
    "objectives": "objective",
    "studies": "study",
    "models": "model",
    "workloads": "workload",
    "chiplets": "chiplet_library",
    "memory": "memory",
}


def register_kind(kind: str, loader: str, *, folders: tuple[str, ...] = ()) -> None:
    """Register (or replace) the loader of ``kind``; ``folders`` are parent-folder names that imply it."""
    if ":" not in loader:
        raise ValueError(f"loader must be 'module:function', got {loader!r}")
    KINDS[kind] = loader
    for f in folders:
        FOLDER_KINDS[f] = kind


def detect_kind(path: str | os.PathLike[str]) -> str:
    """The kind of a configuration file (``kind:`` key, else parent folder); :class:`ConfigError` if unknown."""
    name = str(path)
    root = load_yaml(path)
    data = root.data
    if isinstance(data, dict) and "kind" in data:
        kind = data["kind"]
        if not isinstance(kind, str) or kind not in KINDS:
            raise ConfigError(f"is not a known kind; allowed: {', '.join(sorted(KINDS))}", file=name, key="kind", value=kind)
        return kind
    folder = Path(path).resolve().parent.name
    kind = FOLDER_KINDS.get(folder)
    if kind is None or kind not in KINDS:
        raise ConfigError(
            f"has no 'kind:' key and its folder {folder!r} does not imply one; add kind: one of {', '.join(sorted(KINDS))}",
            file=name,
        )
    return kind


def loader_for(kind: str) -> Callable[[str], Any]:
    """The loader function of ``kind`` (imported now)."""
    try:
        target = KINDS[kind]
    except KeyError:
        raise ConfigError(f"is not a known kind; allowed: {', '.join(sorted(KINDS))}", key="kind", value=kind) from None
    module_name, func_name = target.split(":", 1)
    return getattr(importlib.import_module(module_name), func_name)


def validate_file(path: str | os.PathLike[str]) -> str:
    """Validate one file with the loader of its kind; returns the kind. Raises :class:`ConfigError`."""
    kind = detect_kind(path)
    try:
        loader_for(kind)(str(path))
    except ConfigError as exc:
        raise exc.located(file=str(path)) from None
    return kind
