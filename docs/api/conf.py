"""Sphinx configuration of the hydra_opt API reference (built from the docstrings).

Build (from the repository root; output outside the source tree)::

    python -m sphinx -W --keep-going -b html docs/api /tmp/hydra_opt_api
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))  # document this checkout, not an installed copy

import hydra_opt  # noqa: E402

project = "hydra_opt"
author = "hydra_opt developers"
release = version = hydra_opt.__version__
copyright = "hydra_opt developers, MIT licence"

extensions = ["sphinx.ext.autodoc", "sphinx.ext.napoleon"]
exclude_patterns: list[str] = []
root_doc = "index"

# Google-style docstrings (as Optuna's); instance attributes as fields so dataclass fields are described once.
napoleon_google_docstring = True
napoleon_numpy_docstring = False
napoleon_use_ivar = True
autodoc_default_options = {"members": True, "show-inheritance": True, "member-order": "bysource"}
autodoc_typehints = "signature"
autodoc_preserve_defaults = True  # show `DEFAULT_OBJECTIVES`, not its repr
autodoc_class_signature = "mixed"
autoclass_content = "class"

html_theme = "alabaster"
html_static_path: list[str] = []

# Every cross-reference must resolve (a renamed or undocumented hydra_opt name fails the build), except names of
# other projects (no intersphinx: the build must work offline) and spellings autodoc derives from annotations.
nitpicky = True
nitpick_ignore_regex = [
    (r"py:.*", r"(optuna|numpy|np|collections|pathlib|os|typing|enum)(\..*)?"),
    (r"py:class", r"(dict|tuple|list|set|frozenset|type|Mapping|Sequence)\[.*"),
    (r"py:class", r"(ndarray|Path|Any|Callable|Iterator|Mapping|Sequence|TrialState|FrozenTrial|Study)"),
    (r"py:class", r"(.*\.)?_\w+"),  # a private class named in a public signature
    (r"py:(exc|class)", r"ConfigError"),  # the short name (napoleon's Raises, prose); documented on the config page
    # evaluate/ and workload/ docstrings (owned by other work in progress): a field list and an undocumented member.
    (r"py:class", r"(batching|scheduler)"),
    (r"py:meth", r"requests"),
    # Types of the workload layer's records, below the API this reference covers.
    (r"py:class", r"(hydra_opt\.workload\.\w+\.)?(Block|Layer|LengthProfile|TraceLengths|Trace|Arrival)"),
]
