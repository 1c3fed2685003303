"""Cycle, traffic and energy model of output-stationary (reshapable) systolic arrays.

One model serves DynaCore and every baseline (fixed array, Planaria, SARA, BitFusion, FIGLUT-like, SIMD): an
:class:`Architecture` is a device (clock, buffer, DRAM bandwidth) whose PE array can be partitioned in one or more
:class:`Mode` s — ``cores`` identical sub-arrays of ``rows × cols`` PEs, each able to realise a set of MEUs.

MEU geometry (DynaCore paper, Secs. 4-5). On an ``S × S`` core the selector pattern cuts the physical rows into
``G`` groups of ``S/G`` rows. Within a group the rows hold different tokens and share weights vertically, so
``m = S/G``; the groups either cover different output columns (spatial regrouping: ``n = G·S``) or different
slices of ``K`` (Split-K over ``t`` groups), so ``n = G·S/t`` and ``m·n·t = S²``. ``G`` and ``t`` are powers of two
with ``t | G``; with ``t = 1`` this gives the ``log2(S)+1`` spatial shapes ``S×S, S/2×2S, …, 1×S²``.

Cycles of one tile (the work of one MEU on one core), following SCALE-Sim's output-stationary count
``K + R + C − 2`` with the group height ``m`` as ``R`` (operands still cross the physical width ``C``):

* steady state: ``k_eff = ⌈K / (k_pack · t)⌉`` cycles (Split-K shortens the reduction each group walks; the
  inner-product INT8 datapath covers ``k_pack = 2`` K-elements per cycle) — stretched when the weight path cannot
  deliver ``(S/m)`` streams of ``C`` words per cycle (asymmetric regrouping, Sec. 4.3);
* fill: ``m + C − 2`` cycles of operand skew;
* drain: the array empties row by row in ``rows`` cycles, overlapped with the next tile's fill (double-buffered
  output registers), so only the last tile's drain is paid, once per GEMM.
* the tiles of a pyramid's parts share one scheduling window (longest-first list scheduling over the cores). Split-K's partial sums are added while
  they pass through the final group (tick-tock reduction, Sec. 5.3): the drain stays ``rows`` cycles, no reduction
  network, no extra cycles.

Tiles of one part are distributed over the ``cores`` sub-arrays in rounds (``⌈tiles / cores⌉``); the parts of a
pyramid are list-scheduled together. Weights (or, for
activation × activation products, the KV-cache operand) stream from DRAM once per part when the tiles held at once
fit in half the buffer (they stay resident across the part's token passes), else once per pass; a matrix that fits
in half the buffer is read once. Activations live in the on-chip buffer unless they exceed it.
latency = max(compute, DRAM) per GEMM (double-buffered streaming).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from hydra_opt.config.errors import ConfigError
from hydra_opt.hardware.dynacore.energy import DEFAULT_ENERGY, EnergyModel, execution_energy_j
from hydra_opt.hardware.dynacore.precision import Datapath

__all__ = [
    "MEU",
    "reachable_meus",
    "spatial_shapes",
    "Device",
    "TABLE2_DEVICE",
    "Mode",
    "Architecture",
    "Part",
    "PartCost",
    "GemmCost",
    "part_cost",
    "gemm_cost",
    "gemm_dram_bytes",
    "is_power_of_two",
]


def is_power_of_two(x: int) -> bool:
    """Whether ``x`` is a positive power of two."""
    return isinstance(x, int) and x > 0 and (x & (x - 1)) == 0


@dataclass(frozen=True, order=True)
class MEU:
    """A Minimum Efficient Unit: ``m`` tokens × ``n`` output columns, reduction split over ``t`` groups."""

    m: int
    n: int
    t: int = 1

    @property
    def pes(self) -> int:
        """PEs the MEU occupies (``m·n·t``)."""
        return self.m * self.n * self.t

    def __str__(self) -> str:
        return f"{self.m}x{self.n}x{self.t}"


def reachable_meus(size: int) -> tuple[MEU, ...]:
    """All MEUs an ``size × size`` DynaCore core realises (``m·n·t = size²``, powers of two, ``t | S/m``).

    Sorted by decreasing ``m`` then decreasing ``n``. A 32×32 core has 21 (six spatial shapes).
    """
    if not is_power_of_two(size):
        raise ConfigError("is not a power of two", key="core_size", value=size)
    out = []
    g = 1
    while g <= size:
        t = 1
        while t <= g:
            out.append(MEU(size // g, size * g // t, t))
            t *= 2
        g *= 2
    return tuple(sorted(out, key=lambda u: (-u.m, -u.n)))


def spatial_shapes(size: int) -> tuple[MEU, ...]:
    """The spatial regroupings ``S×S, S/2×2S, …, 1×S²`` (``t = 1``)."""
    return tuple(u for u in reachable_meus(size) if u.t == 1)


@dataclass(frozen=True)
class Device:
    """The device around the PE array.

    Attributes:
        clock_mhz: Clock, MHz.
        buffer_mb: On-chip buffer, MB (2**20 bytes).
        dram_tbps: DRAM/HBM bandwidth, TB/s (1e12 bytes/s).
    """

    clock_mhz: float = 500.0
    buffer_mb: float = 8.0
    dram_tbps: float = 4.0

    def __post_init__(self) -> None:
        for key in ("clock_mhz", "buffer_mb", "dram_tbps"):
            v = getattr(self, key)
            if not (isinstance(v, (int, float)) and math.isfinite(v) and v > 0):
                raise ConfigError("is not a positive number", key=key, value=v)

    @property
    def clock_hz(self) -> float:
        """Clock, Hz."""
        return self.clock_mhz * 1e6

    @property
    def buffer_bytes(self) -> float:
        """On-chip buffer, bytes."""
        return self.buffer_mb * 2**20

    @property
    def dram_bytes_per_s(self) -> float:
        """DRAM bandwidth, bytes/s."""
        return self.dram_tbps * 1e12


#: DynaCore paper Table 2: every design at 28 nm, 500 MHz, 8 MB buffer, 4 TB/s DRAM.
TABLE2_DEVICE = Device(500.0, 8.0, 4.0)


@dataclass(frozen=True)
class Mode:
    """One partition of the PE array into identical sub-arrays.

    Attributes:
        name: Label, e.g. ``"16x32x32"``.
        cores: Sub-arrays working on independent tiles.
        rows: Physical rows of one sub-array (drain length).
        cols: Physical columns of one sub-array (operand skew).
        meus: MEUs one sub-array realises.
        weight_port_bits: Weight bits the buffer delivers to one sub-array per cycle.
        kind: ``"os"`` (output-stationary array) or ``"simd"`` (dot-product lanes: ``rows = cols = 1``,
            MEU ``1×1×width``, an adder tree of ``log2(width)`` levels instead of operand skew).
    """

    name: str
    cores: int
    rows: int
    cols: int
    meus: tuple[MEU, ...]
    weight_port_bits: int
    kind: str = "os"

    @property
    def pes(self) -> int:
        """Multipliers of the whole mode (all sub-arrays)."""
        if self.kind == "simd":
            return self.cores * max(u.t for u in self.meus)
        return self.cores * self.rows * self.cols


@dataclass(frozen=True)
class Architecture:
    """A device with its PE-array modes.

    Attributes:
        name: Architecture name (``"dynacore"``, ``"systolic"``...).
        modes: Partitions the array can take (the search picks the best per GEMM).
        datapaths: Datapath names the PEs support.
        pyramid: Whether a batch is decomposed by pyramid packing (DynaCore, Sec. 7.2); otherwise one MEU per
            GEMM with ``⌈M/m⌉`` padded passes.
        outer_product: Bit-composable outer-product PEs (BitFusion): low precision adds outputs, not K-depth, so
            ``k_pack`` is 1 whatever the datapath.
        device: Clock, buffer and DRAM bandwidth.
        energy: Energy constants.
    """

    name: str
    modes: tuple[Mode, ...]
    datapaths: tuple[str, ...] = ("fp16", "w8a8", "w4a16")
    pyramid: bool = False
    outer_product: bool = False
    device: Device = TABLE2_DEVICE
    energy: EnergyModel = DEFAULT_ENERGY
    _key: tuple = field(default=(), compare=False, repr=False)

    def __post_init__(self) -> None:
        if not self.modes:
            raise ConfigError("needs at least one mode", key=f"{self.name}.modes", value=())
        # A cheap hashable identity for lookup tables (hashing the nested MEU tuples per lookup is slow).
        object.__setattr__(
            self,
            "_key",
            (self.name, self.modes, self.datapaths, self.pyramid, self.outer_product, self.device, self.energy),
        )

    @property
    def key(self) -> tuple:
        """Hashable identity of the architecture (for caches)."""
        return self._key

    @property
    def pes(self) -> int:
        """Multipliers of the device (the largest mode)."""
        return max(md.pes for md in self.modes)

    @property
    def static_power_w(self) -> float:
        """Leakage of the device's PEs and buffer, W."""
        return self.energy.static_power_w(self.pes, self.device.buffer_bytes)

    def k_pack(self, dp: Datapath) -> int:
        """K-adjacent products per PE per cycle at ``dp`` on this architecture."""
        return 1 if self.outer_product else dp.k_pack

    def check_datapath(self, dp: Datapath) -> None:
        """Raise ConfigError when the PEs cannot run ``dp``."""
        if dp.name not in self.datapaths:
            raise ConfigError(
                f"is not supported by {self.name}; allowed: {', '.join(self.datapaths)}", key="precision", value=dp.name
            )

    def with_device(self, device: Device) -> Architecture:
        """The same architecture on another device."""
        return Architecture(
            self.name, self.modes, self.datapaths, self.pyramid, self.outer_product, device, self.energy
        )


@dataclass(frozen=True)
class Part:
    """One piece of a GEMM's token dimension executed with one MEU.

    Attributes:
        mode: Index into ``Architecture.modes``.
        meu: The MEU.
        tokens: Rows of the GEMM this part covers.
    """

    mode: int
    meu: MEU
    tokens: int

    @property
    def passes(self) -> int:
        """Passes of ``m`` rows (``⌈tokens/m⌉``; exact for pyramid parts)."""
        return -(-self.tokens // self.meu.m)


@dataclass(frozen=True)
class PartCost:
    """Cycles and traffic of one part.

    Attributes:
        tiles: Tiles (MEU executions) of the part.
        rounds: Rounds of tiles over the sub-arrays.
        fill_cycles: Operand-skew cycles on the critical path (rounds · fill).
        steady_cycles: Steady-state cycles on the critical path (rounds · steady per tile).
        steady_compute_cycles: Steady-state cycles the arithmetic alone needs (without the weight-port stretch).
        macs: Useful multiply-accumulates.
        sram_bytes: Bytes read/written in the on-chip buffer (weights, inputs, outputs per tile).
        weight_port_bound: Whether the weight path stretched the steady state.
        sweeps: Times the part streams the right operand from DRAM: 1 when the tiles the sub-arrays hold at once
            (``cores · n · K`` elements) fit in half the buffer, so each tile stays resident across the part's
            ``⌈tokens/m⌉`` passes; otherwise once per pass (output-stationary tiles accumulate over all of ``K``,
            so a non-resident weight tile must be re-read for every token group).
    """

    tiles: int
    rounds: int
    fill_cycles: int
    steady_cycles: int
    steady_compute_cycles: int
    macs: int
    sram_bytes: float
    weight_port_bound: bool
    sweeps: int = 1

    @property
    def cycles(self) -> int:
        """Critical-path cycles of the part (fill + steady)."""
        return self.fill_cycles + self.steady_cycles


def part_cost(
    arch: Architecture, part: Part, m: int, n: int, k: int, count: int, weight: bool, dp: Datapath
) -> PartCost:
    """Cycles and buffer traffic of ``part`` of the GEMM ``(m×k)@(k×n)`` × ``count`` (Secs. 4-6).

    Args:
        arch: The architecture.
        part: The part (its ``tokens`` ≤ the GEMM's ``m``).
        m, n, k, count: GEMM dimensions and repetitions.
        weight: Whether the right operand is a weight (else an activation / KV-cache operand at ``dp.act_bits``).
        dp: Datapath.
    """
    mode = arch.modes[part.mode]
    meu = part.meu
    p = arch.k_pack(dp)
    b_bits = dp.weight_bits if weight else dp.act_bits
    tiles = count * part.passes * -(-n // meu.n)
    rounds = -(-tiles // mode.cores)
    k_eff = -(-k // (p * meu.t))
    # Weight path: (rows/m) groups each take `cols` words of p K-adjacent elements per cycle (Sec. 4.3: g groups
    # need g streams); 4-bit weights let the same port carry 4x the elements (Sec. 6.2).
    streams = max(1, mode.rows // meu.m) if mode.kind == "os" else 1
    lanes = mode.cols if mode.kind == "os" else meu.t
    demand_bits = streams * lanes * p * b_bits
    steady = k_eff if demand_bits <= mode.weight_port_bits else -(-k_eff * demand_bits // mode.weight_port_bits)
    fill = (meu.m + mode.cols - 2) if mode.kind == "os" else 0
    a_bytes = dp.act_bytes
    per_tile_bytes = meu.n * k * b_bits / 8.0 + meu.m * k * a_bytes + meu.m * meu.n * a_bytes
    resident = min(tiles, mode.cores) * meu.n * k * b_bits / 8.0 <= arch.device.buffer_bytes / 2
    return PartCost(
        tiles=tiles,
        rounds=rounds,
        fill_cycles=rounds * fill,
        steady_cycles=rounds * steady,
        steady_compute_cycles=rounds * k_eff,
        macs=part.tokens * n * k * count,
        sram_bytes=tiles * per_tile_bytes,
        weight_port_bound=steady > k_eff,
        sweeps=1 if resident else part.passes,
    )


@dataclass(frozen=True)
class GemmCost:
    """Time, traffic and energy of one GEMM on an architecture with a chosen plan.

    Attributes:
        parts: The plan (parts executed one after another, each spread over the sub-arrays).
        fill_cycles, steady_cycles, drain_cycles: Critical-path cycles by phase.
        compute_s: (fill + steady + drain) / clock, s.
        dram_bytes: Bytes from/to DRAM.
        dram_s: dram_bytes / bandwidth, s.
        latency_s: max(compute_s, dram_s), s.
        macs: Useful MACs.
        utilization: macs / (PEs · k_pack · compute cycles).
        sram_bytes: On-chip buffer traffic, bytes.
        energy_j: Energy, J.
    """

    parts: tuple[Part, ...]
    fill_cycles: int
    steady_cycles: int
    drain_cycles: int
    compute_s: float
    dram_bytes: float
    dram_s: float
    latency_s: float
    macs: int
    utilization: float
    sram_bytes: float
    energy_j: float

    @property
    def cycles(self) -> int:
        """Total compute cycles (fill + steady + drain)."""
        return self.fill_cycles + self.steady_cycles + self.drain_cycles

    @property
    def bound(self) -> str:
        """``"memory"`` when DRAM streaming sets the latency, else ``"compute"``."""
        return "memory" if self.dram_s > self.compute_s else "compute"


def _shared_window(cores: int, pcs: tuple[PartCost, ...]) -> tuple[int, int]:
    """(fill, steady) cycles of the busiest core when the tiles of all parts share one scheduling window.

    Pyramid parts run "within the same scheduling window" (Sec. 7.2): tiles are list-scheduled longest first onto
    the least-loaded core (LPT), in bulk — every core takes ``⌊T/C⌋`` tiles of a part, the remainder goes to the
    least-loaded cores. With one part this equals ``⌈T/C⌉`` rounds.
    """
    loads = [(0, 0)] * cores  # (fill, steady) per core
    per_tile = sorted(
        ((pc.fill_cycles // pc.rounds, pc.steady_cycles // pc.rounds, pc.tiles) for pc in pcs if pc.rounds),
        key=lambda x: -(x[0] + x[1]),
    )
    for f, st, tiles in per_tile:
        q, r = divmod(tiles, cores)
        loads = [(a + q * f, b + q * st) for a, b in loads]
        if r:
            loads.sort(key=lambda x: x[0] + x[1])
            loads = [(a + f, b + st) for a, b in loads[:r]] + loads[r:]
    return max(loads, key=lambda x: x[0] + x[1])


def gemm_dram_bytes(
    arch: Architecture, m: int, n: int, k: int, count: int, weight: bool, dp: Datapath, sweeps: int = 1
) -> float:
    """DRAM bytes of a GEMM: the right operand ``sweeps`` times (once when it fits in half the buffer), plus the
    activations when they exceed the buffer."""
    b_bits = dp.weight_bits if weight else dp.act_bits
    operand = count * n * k * b_bits / 8.0
    if operand <= arch.device.buffer_bytes / 2:
        sweeps = 1
    acts = count * m * (k + n) * dp.act_bytes
    return operand * sweeps + (acts if acts > arch.device.buffer_bytes else 0.0)


def gemm_cost(
    arch: Architecture,
    parts: tuple[Part, ...],
    m: int,
    n: int,
    k: int,
    count: int,
    weight: bool,
    dp: Datapath,
    part_costs: tuple[PartCost, ...] | None = None,
) -> GemmCost:
    """Assemble the cost of a GEMM executed with ``parts`` (see the module docstring for the model)."""
    pcs = (
        part_costs if part_costs is not None else tuple(part_cost(arch, pt, m, n, k, count, weight, dp) for pt in parts)
    )
    if len(parts) > 1 and len({pt.mode for pt in parts}) == 1:
        fill, steady = _shared_window(arch.modes[parts[0].mode].cores, pcs)
    else:
        fill = sum(pc.fill_cycles for pc in pcs)
        steady = sum(pc.steady_cycles for pc in pcs)
    drain_modes = [arch.modes[pt.mode] for pt in parts]
    drain = max(
        (md.rows if md.kind == "os" else int(math.log2(max(pt.meu.t, 1)))) for md, pt in zip(drain_modes, parts)
    )
    cycles = fill + steady + drain
    f = arch.device.clock_hz
    compute_s = cycles / f
    # Each part sweeps the operand at least once (parts are separate passes over N with different n).
    dram_bytes = gemm_dram_bytes(arch, m, n, k, count, weight, dp, sweeps=sum(pc.sweeps for pc in pcs))
    dram_s = dram_bytes / arch.device.dram_bytes_per_s
    latency = max(compute_s, dram_s)
    macs = m * n * k * count
    util = macs / (arch.pes * arch.k_pack(dp) * cycles) if cycles else 0.0
    sram = sum(pc.sram_bytes for pc in pcs)
    energy = execution_energy_j(
        arch.energy,
        macs=macs,
        mac_kind=dp.mac_kind,
        sram_bytes=sram,
        dram_bytes=dram_bytes,
        static_power_w=arch.static_power_w,
        latency_s=latency,
    )
    return GemmCost(tuple(parts), fill, steady, drain, compute_s, dram_bytes, dram_s, latency, macs, util, sram, energy)
