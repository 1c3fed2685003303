"""Configuration loading and validation: YAML files into frozen dataclasses, with located errors."""

from __future__ import annotations

from hydra_opt.config.errors import EXIT_USAGE, ConfigError
from hydra_opt.config.reader import Node, load_yaml

__all__ = ["ConfigError", "EXIT_USAGE", "Node", "load_yaml"]
