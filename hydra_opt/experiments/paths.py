"""Where the reproduction reads its inputs: given as parameters, never reached for from the package's location.

Two folders, both outside the package:

* the **checkout** — a clone of the repository, whose ``studies/paper/*.yaml`` (``kind: paper_experiment`` and the
  paper studies) and ``search_spaces/`` the experiments read. Default: the current folder (run from the clone's root,
  as the README does); ``report --reproduce --checkout DIR`` names another.
* the **shared data** folder — reference data that is never copied into the project: ``data/traces/`` (the
  Mooncake trace of the DynaCore serving runs) and ``reference/hydra_artifact/pareto_fronts/`` (the artifact's
  published Fig. 8 fronts). Default: ``$HYDRA_OPT_SHARED``, else ``../shared`` beside the checkout;
  ``report --reproduce --shared DIR`` names another. When it is absent the parts that need it are skipped and the
  report says so.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

__all__ = ["SHARED_ENV", "ExperimentPaths"]

#: Environment variable naming the shared data folder (default ``<checkout>/../shared``).
SHARED_ENV = "HYDRA_OPT_SHARED"


@dataclass(frozen=True)
class ExperimentPaths:
    """Input folders of the reproduction (absolute once built by :meth:`default`).

    Attributes:
        checkout: Root of a repository clone (holds ``studies/paper/`` and ``search_spaces/``).
        shared: The shared data folder (holds ``data/traces/`` and ``reference/hydra_artifact/``).
    """

    checkout: Path
    shared: Path

    @classmethod
    def default(cls, checkout: str | Path | None = None, shared: str | Path | None = None) -> ExperimentPaths:
        """The folders given, else the documented defaults (module docstring), resolved to absolute paths."""
        root = Path(checkout) if checkout else Path.cwd()
        data = Path(shared) if shared else Path(os.environ.get(SHARED_ENV) or root.resolve().parent / "shared")
        return cls(checkout=root.resolve(), shared=data.resolve())

    @property
    def paper_dir(self) -> Path:
        """Folder of the paper-experiment YAMLs (``studies/paper``)."""
        return self.checkout / "studies" / "paper"

    @property
    def traces_dir(self) -> Path:
        """Folder of the shared request traces (``data/traces``)."""
        return self.shared / "data" / "traces"

    @property
    def artifact_fronts(self) -> Path:
        """Folder of the HYDRA artifact's published Fig. 8 fronts."""
        return self.shared / "reference" / "hydra_artifact" / "pareto_fronts"
