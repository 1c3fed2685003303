"""Configuration search (DynaCore paper, Sec. 7.2, Alg. 1) and its lookup-table cache.

For a GEMM ``M×N×K`` at a datapath: pyramid packing fixes ``m`` for each part; for each part every reachable
``(n, t)`` with ``m·n·t = S²`` is scored by ``latency + λ·energy`` and the best kept (exhaustive: a 32×32 core has
21 MEUs). The packed plan is then compared with every padded single-MEU plan (``⌈M/m⌉`` passes of one
MEU): an addition to Alg. 1 for datapaths whose weight port cannot feed the flattened shapes (FP16, W8A8 at small
``m``), where packing can be slower; the search keeps whichever scores best, so adding packing never hurts.
Architectures without pyramid packing (fixed arrays, Planaria, SARA, a fixed-MEU DynaCore) pick the best
(mode, MEU) for the whole GEMM with ``⌈M/m⌉`` padded passes.

:class:`ConfigTable` caches the result keyed by ``(M, N, K, count, weight, datapath)``: built offline once per core
design, then a serving simulation pays one dictionary lookup per batch.
"""

from __future__ import annotations

from collections.abc import Iterable

from hydra_opt.hardware.dynacore.core import Architecture, GemmCost, Part, PartCost, gemm_cost, part_cost
from hydra_opt.hardware.dynacore.packing import pyramid_pack
from hydra_opt.hardware.dynacore.precision import Datapath, get_datapath

__all__ = ["DEFAULT_LAMBDA_S_PER_J", "search_gemm", "ConfigTable"]

#: Default latency–energy preference λ of the score ``latency_s + λ·energy_j`` (s per J). Small: latency first,
#: energy breaks near-ties (a 1 mJ difference weighs as much as 1 µs).
DEFAULT_LAMBDA_S_PER_J = 1e-3


def _part_score(arch: Architecture, pc: PartCost, lam: float) -> float:
    # MAC and DRAM energy do not depend on (n, t); buffer traffic and leakage-over-time do.
    t = pc.cycles / arch.device.clock_hz
    e = pc.sram_bytes * arch.energy.sram_pj_per_byte * 1e-12 + arch.static_power_w * t
    return t + lam * e


def search_gemm(
    arch: Architecture,
    m: int,
    n: int,
    k: int,
    count: int = 1,
    weight: bool = True,
    datapath: str | Datapath = "fp16",
    lam: float = DEFAULT_LAMBDA_S_PER_J,
) -> GemmCost:
    """The best plan for ``(m×k)@(k×n)`` × ``count`` on ``arch`` and its cost (Alg. 1).

    Args:
        arch: Architecture.
        m, n, k, count: GEMM dimensions (all ≥ 1) and repetitions.
        weight: Whether the right operand is a weight matrix.
        datapath: Datapath (name or object).
        lam: λ of the score ``latency_s + λ·energy_j``.
    """
    dp = get_datapath(datapath)
    arch.check_datapath(dp)
    best: GemmCost | None = None
    best_score = float("inf")
    for mi, mode in enumerate(arch.modes):
        if arch.pyramid and mode.kind == "os":
            allowed = tuple(sorted({u.m for u in mode.meus}))
            parts: list[Part] = []
            pcs: list[PartCost] = []
            for mm, passes in pyramid_pack(m, mode.rows, allowed):
                cand = None
                cand_score = float("inf")
                for u in mode.meus:
                    if u.m != mm:
                        continue
                    pt = Part(mi, u, mm * passes)
                    pc = part_cost(arch, pt, m, n, k, count, weight, dp)
                    s = _part_score(arch, pc, lam)
                    if s < cand_score:
                        cand, cand_score = (pt, pc), s
                assert cand is not None
                parts.append(cand[0])
                pcs.append(cand[1])
            plans = [(tuple(parts), tuple(pcs))]
            # Padded single-MEU plans are scored too: when the flattened shapes starve on the weight port (FP16,
            # W8A8 on small m) one padded shape can beat the pyramid; with 4-bit weights the pyramid always wins.
            plans += [((Part(mi, u, m),), None) for u in mode.meus]
        else:
            plans = [((Part(mi, u, m),), None) for u in mode.meus]
        for pts, pcs_ in plans:
            cost = gemm_cost(arch, pts, m, n, k, count, weight, dp, part_costs=pcs_)
            # Activation × activation products (attention) stream a KV operand shared by GQA heads, priced by the
            # caller for the whole block: their plans are chosen on compute time.
            s = (cost.latency_s if weight else cost.compute_s) + lam * cost.energy_j
            if s < best_score:
                best, best_score = cost, s
    assert best is not None
    return best


class ConfigTable:
    """Lookup table of searched plans for one architecture and λ.

    Args:
        arch: The architecture.
        lam: λ of the search score.
    """

    def __init__(self, arch: Architecture, lam: float = DEFAULT_LAMBDA_S_PER_J) -> None:
        self.arch = arch
        self.lam = lam
        self._table: dict[tuple, GemmCost] = {}

    def __len__(self) -> int:
        return len(self._table)

    def lookup(
        self, m: int, n: int, k: int, count: int = 1, weight: bool = True, datapath: str | Datapath = "fp16"
    ) -> GemmCost:
        """The cached plan (searched and stored on first use)."""
        name = datapath if isinstance(datapath, str) else datapath.name
        key = (m, n, k, count, weight, name)
        hit = self._table.get(key)
        if hit is None:
            hit = search_gemm(self.arch, m, n, k, count, weight, name, self.lam)
            self._table[key] = hit
        return hit

    def build(
        self, shapes: Iterable[tuple[int, int, int, bool]], batch_sizes: Iterable[int], datapaths: Iterable[str]
    ) -> int:
        """Populate the table offline for layer shapes ``(n, k, count, weight)`` × token counts × datapaths.

        Returns:
            Number of entries in the table.
        """
        bs = list(batch_sizes)
        dps = list(datapaths)
        for n, k, count, weight in shapes:
            for m in bs:
                for d in dps:
                    self.lookup(m, n, k, count, weight, d)
        return len(self._table)
