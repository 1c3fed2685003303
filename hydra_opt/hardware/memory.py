"""Memory chiplets (HBM3, HBM3E, GDDR7) from package data ``hydra_opt/data/memory/*.yaml``.

Each file (``kind: memory``) gives capacity (GiB: the artifact's "16GB" is 16,384 MB of 2**20 bytes), the usable
bandwidth of the chiplet's node (GB/s = 1e9 B/s), the vendor peak bandwidth (documentation only; must be >= the
usable one), latency (ns), access energy (pJ/byte) and footprint (mm²), with sources in the file's comments.
"""

from __future__ import annotations

import os
from importlib import resources
from pathlib import Path

from hydra_opt.config import ConfigError, Node, load_yaml
from hydra_opt.hardware.types import MemoryType

__all__ = ["GIB", "get_memory", "list_memories", "load_memory", "validate_memory_file"]

#: Bytes per GiB (capacities are binary, as vendors state stack sizes).
GIB = 2**30

_CACHE: dict[str, MemoryType] = {}


def _root():
    return resources.files("hydra_opt") / "data" / "memory"


def list_memories() -> tuple[str, ...]:
    """Names of the shipped memory chiplets."""
    return tuple(sorted(p.name.rsplit(".", 1)[0] for p in _root().iterdir() if p.name.endswith((".yaml", ".yml"))))


def _parse(root: Node) -> MemoryType:
    root.mapping()
    if root.has("kind"):
        root.get("kind").str(choices=("memory",))
    name = root.get("name").str(max_len=64)
    root.get("source", "").str(max_len=1000)
    capacity = root.get("capacity_gib").number(positive=True, maximum=1e6)
    bw_node = root.get("bw_gbps")
    bw = bw_node.number()
    if not 1.0 <= bw <= 1e7:  # GB/s; 1e-300 gave NaN energy per token
        raise bw_node.error("must be in 1..1e+07 GB/s")
    peak_node = root.get("peak_bw_gbps", bw)
    peak = peak_node.number(positive=True, maximum=1e7)
    if peak < bw:
        raise peak_node.error(f"must be >= bw_gbps ({bw:g}): the usable bandwidth cannot exceed the peak")
    mem = MemoryType(
        name=name,
        capacity_bytes=capacity * GIB,
        bw_gbps=bw,
        latency_ns=root.get("latency_ns", 0.0).number(minimum=0.0, maximum=1e9),
        energy_pj_per_byte=root.get("energy_pj_per_byte", 0.0).number(minimum=0.0, maximum=1e6),
        area_mm2=root.get("area_mm2", 0.0).number(minimum=0.0, maximum=1e5),
    )
    root.done()
    return mem


def load_memory(path: str | os.PathLike[str]) -> MemoryType:
    """Load a memory YAML file (located :class:`ConfigError` on mistakes)."""
    return _parse(load_yaml(path))


def validate_memory_file(path: str | os.PathLike[str]) -> MemoryType:
    """Validation entry point of the ``validate`` command for ``kind: memory``."""
    return load_memory(path)


def get_memory(name: str) -> MemoryType:
    """A shipped memory chiplet by name (``hbm3``, ``hbm3e``, ``gddr7``), or a memory YAML by path."""
    hit = _CACHE.get(name)
    if hit is not None:
        return hit
    if name.endswith((".yaml", ".yml")) and Path(name).exists():
        mem = load_memory(name)
    else:
        names = list_memories()
        if name not in names:
            raise ConfigError(f"is not a known memory; allowed: {', '.join(names)}", key="memory", value=name)
        mem = _parse(load_yaml(str(_root() / f"{name}.yaml"), display=f"hydra_opt/data/memory/{name}.yaml"))
    _CACHE[name] = mem
    return mem
