"""The HYDRA paper's design spaces (Table III; METHODS 2a) as iterators of :class:`DesignPoint` with exact counts.

All spaces fill every slot of the 6 x 4 package (compute + HBM = 24), use HBM3, batch sizes {2, 4, ..., 64} and
D2D bandwidths {256, 384, 512, 640} GB/s:

* Llama-3: HBM 2..16, A_p >= 1, A_d >= 1 -> 210 compositions x 24 = 5,040 designs;
* Mamba-2: the same with M_p/M_d -> 5,040;
* Nemotron-H, all compositions of Table III: HBM 2..16, A_p, A_d, M_p, M_d >= 1 -> 7,280 x 24 = 174,720;
* Nemotron-H, the artifact's subset: HBM even, the four compute counts odd -> 710 x 24 = 17,040.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np

from hydra_opt.system.design import DesignPoint

__all__ = [
    "BATCH_SIZES",
    "D2D_BWS_GBPS",
    "PAPER_SPACES",
    "DesignSpace",
    "compositions",
    "llama3_space",
    "mamba2_space",
    "n_compositions",
    "nemotron_h_space",
    "paper_space",
]

#: Max batch sizes of Table III.
BATCH_SIZES: tuple[int, ...] = (2, 4, 8, 16, 32, 64)
#: D2D bandwidths of Table III, GB/s.
D2D_BWS_GBPS: tuple[int, ...] = (256, 384, 512, 640)

ATTN = ("tscs_p", "tscs_d")
MAMBA = ("marca_p", "marca_d")


def _parts(total: int, k: int, *, odd: bool) -> Iterator[tuple[int, ...]]:
    """Ordered k-tuples of integers >= 1 (odd when ``odd``) summing to ``total``, lexicographic."""
    if k == 1:
        if total >= 1 and (not odd or total % 2 == 1):
            yield (total,)
        return
    step = 2 if odd else 1
    for first in range(1, total - (k - 1) + 1, step):
        for rest in _parts(total - first, k - 1, odd=odd):
            yield (first, *rest)


def compositions(
    names: Sequence[str],
    *,
    n_slots: int = 24,
    mem_counts: Sequence[int] = tuple(range(2, 17)),
    odd_compute: bool = False,
) -> Iterator[tuple[int, tuple[tuple[str, int], ...]]]:
    """(n_mem, counts) for every way to fill ``n_slots`` with ``n_mem`` memories and >= 1 of each compute type."""
    for m in mem_counts:
        for parts in _parts(n_slots - m, len(names), odd=odd_compute):
            yield m, tuple(sorted(zip(names, parts)))


def n_compositions(k: int, *, n_slots: int = 24, mem_counts: Sequence[int] = tuple(range(2, 17)), odd_compute: bool = False) -> int:
    """Closed-form count of :func:`compositions`: sum over m of C(r-1, k-1) (C(j+k-1, k-1) with r = k + 2j if odd)."""
    total = 0
    for m in mem_counts:
        r = n_slots - m
        if odd_compute:
            if r < k or (r - k) % 2:
                continue
            j = (r - k) // 2
            total += math.comb(j + k - 1, k - 1)
        elif r >= k:
            total += math.comb(r - 1, k - 1)
    return total


@dataclass(frozen=True)
class DesignSpace:
    """A finite design space: compositions x D2D bandwidths x batch sizes, with fixed runtime policies.

    Iteration order: composition (HBM count, then counts in lexicographic order), then bandwidth, then batch.
    """

    name: str
    compositions: tuple[tuple[int, tuple[tuple[str, int], ...]], ...]
    d2d_bws_gbps: tuple[int, ...] = D2D_BWS_GBPS
    batch_sizes: tuple[int, ...] = BATCH_SIZES
    memory: str = "hbm3"
    placement: str = "cp"
    batching: str = "static"
    scheduler: str = "static"
    precision: str = "int8"
    slot_area_mm2: float = 144.0

    def __len__(self) -> int:
        return len(self.compositions) * len(self.d2d_bws_gbps) * len(self.batch_sizes)

    @property
    def n_compositions(self) -> int:
        """Number of hardware compositions."""
        return len(self.compositions)

    def __iter__(self) -> Iterator[DesignPoint]:
        for n_mem, counts in self.compositions:
            for bw in self.d2d_bws_gbps:
                for b in self.batch_sizes:
                    yield self._design(n_mem, counts, bw, b)

    def sample(self, n: int, seed: int, **policies: str) -> list[DesignPoint]:
        """``n`` designs on ``n`` distinct compositions (seeded), each with a random D2D bandwidth and batch size.

        Args:
            n: Number of designs (at most :attr:`n_compositions`).
            seed: Seed of the draws (compositions first, then bandwidth and batch per design).
            **policies: Overrides of the space's ``placement``/``batching``/``scheduler`` (other design fields are
                the space's).
        """
        rng = np.random.default_rng(seed)
        out = []
        for ci in rng.choice(len(self.compositions), n, replace=False):
            n_mem, counts = self.compositions[int(ci)]
            bw = rng.choice(self.d2d_bws_gbps)
            out.append(self._design(n_mem, counts, bw, int(rng.choice(self.batch_sizes)), **policies))
        return out

    def _design(self, n_mem: int, counts, bw, batch: int, **policies: str) -> DesignPoint:
        runtime = {"placement": self.placement, "batching": self.batching, "scheduler": self.scheduler, **policies}
        return DesignPoint(counts=counts, memory=self.memory, n_mem=n_mem, d2d_bw_gbps=float(bw), max_batch=batch,
                           precision=self.precision, slot_area_mm2=self.slot_area_mm2, **runtime)


def llama3_space(**policies) -> DesignSpace:
    """Llama-3 space: HBM 2..16, A_p, A_d >= 1 (5,040 designs)."""
    return DesignSpace("llama3", tuple(compositions(ATTN)), **policies)


def mamba2_space(**policies) -> DesignSpace:
    """Mamba-2 space: HBM 2..16, M_p, M_d >= 1 (5,040 designs)."""
    return DesignSpace("mamba2", tuple(compositions(MAMBA)), **policies)


def nemotron_h_space(subset: str = "all", **policies) -> DesignSpace:
    """Nemotron-H space: ``"all"`` Table III compositions (174,720) or the artifact's ``"artifact"`` subset (17,040)."""
    names = (*ATTN, *MAMBA)
    if subset == "all":
        comps = tuple(compositions(names))
    elif subset == "artifact":
        comps = tuple(compositions(names, mem_counts=tuple(range(2, 17, 2)), odd_compute=True))
    else:
        raise ValueError(f"subset must be 'all' or 'artifact', got {subset!r}")
    return DesignSpace(f"nemotron_h_{subset}", comps, **policies)


#: Name -> builder of the paper's spaces.
PAPER_SPACES = {
    "llama3": llama3_space,
    "mamba2": mamba2_space,
    "nemotron_h": lambda **kw: nemotron_h_space("all", **kw),
    "nemotron_h_artifact": lambda **kw: nemotron_h_space("artifact", **kw),
}


def paper_space(name: str, **policies) -> DesignSpace:
    """One of :data:`PAPER_SPACES` by name."""
    try:
        return PAPER_SPACES[name](**policies)
    except KeyError:
        raise ValueError(f"unknown paper space {name!r}; allowed: {', '.join(PAPER_SPACES)}") from None
