"""DynaCore as a chiplet of the HYDRA package: settings, area-limited core count, ChipletType, block pricing.

Area accounting is the shared one (:func:`hydra_opt.hardware.area.composition_area`) with the 28 nm technology table
of the shipped chiplet library (``hydra_opt/data/chiplets/hydra_28nm.yaml``, from the HYDRA artifact's
``component_28nm.yml`` @7e608910): a DynaCore core of ``S²`` PEs is costed at the tensor-core MAC area
(1.3129 mm² per 256 MACs) times ``1 + pe_area_overhead`` (the reshaping/DQ logic; the paper's synthesis overhead,
Table 2, is not in our text), plus one 2.4 Gop/s SFU; SRAM 1.5336 mm² per 1 MB bank; per link bump + PHY, one DMA
per link, all scaled with the D2D bandwidth; the table's overhead fraction on top. The core count is the largest
that fits the slot: ``⌊(slot/(1+overhead) − links·(bump+PHY) − DMAs − SRAM) / (core + SFU)⌋``.
If the library cannot be loaded the same numbers come from :data:`AREA_28NM`.

Importing this package registers ``dynacore`` as a chiplet provider of ``hydra_opt.hardware.chiplets``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

from hydra_opt.config.errors import ConfigError
from hydra_opt.hardware.area import (
    AreaBreakdown,
    Composition,
    CoreComponent,
    SfuComponent,
    SramComponent,
    TechnologyTable,
    composition_area,
)
from hydra_opt.hardware.dynacore.architectures import dynacore
from hydra_opt.hardware.dynacore.core import MEU, Architecture, Device, is_power_of_two, reachable_meus
from hydra_opt.hardware.dynacore.energy import DEFAULT_ENERGY
from hydra_opt.hardware.dynacore.model_cost import gemm_list_cost
from hydra_opt.hardware.dynacore.precision import Datapath, PrecisionPolicy, get_datapath, get_policy
from hydra_opt.hardware.dynacore.search import ConfigTable
from hydra_opt.hardware.types import ChipletType

__all__ = [
    "DynaCoreSettings",
    "coerce_settings",
    "AREA_28NM",
    "core_area_mm2",
    "fixed_area_mm2",
    "area_breakdown",
    "register_provider",
    "cores_for_area",
    "resolve_settings",
    "dynacore_chiplet",
    "settings_architecture",
    "dynacore_block_time",
    "dynacore_block_cost",
    "phase_macs_per_cycle",
]

#: 28 nm component areas (mm²) from the HYDRA artifact's component_28nm.yml (see the module docstring).
AREA_28NM: dict[str, float] = {
    "mac_mm2": 1.3129 / 256,
    "sram_mb_mm2": 1.5336,
    "sram_mb_gbps": 96.0,
    "bump_mm2_per_gbps": 0.238 / 128,
    "phy_mm2_per_gbps": 2.56 / 128,
    "dma_mm2_per_gbps": 0.0672 / 128,
    "sfu_mm2": 0.02,
    "sfu_gops": 2.4,
}


@dataclass(frozen=True)
class DynaCoreSettings:
    """The DynaCore knobs of a design point (sampled by the Optuna search space).

    Field names match ``hydra_opt.system.design.DynaCoreSettings`` (the design's loosely validated copy);
    :func:`coerce_settings` converts any object with these attributes.

    Attributes:
        core_size: ``S`` of each ``S×S`` core (power of two, 4-256).
        meu_policy: ``"adaptive"`` (all reachable MEUs + pyramid packing) or ``"fixed"``.
        meu_shape: ``(m, n, t)`` when ``meu_policy == "fixed"`` (must be reachable), else ``None``.
        prefill_precision: Datapath of prefill (default W8A8: disaggregated quantisation).
        decode_precision: Datapath of decode (default W4A16).
        clock_mhz: Clock, MHz.
        sram_mb: On-chip buffer, MB (1 MB banks).
        cores: Core count; ``None`` = as many as the slot's area allows (:func:`resolve_settings`).
        links: D2D links (4 on a 2-D mesh).
        pe_area_overhead: Extra PE area fraction for the reshaping/DQ logic (0 = the tensor-core MAC figure).
    """

    core_size: int = 32
    meu_policy: str = "adaptive"
    meu_shape: tuple[int, int, int] | None = None
    prefill_precision: str = "w8a8"
    decode_precision: str = "w4a16"
    clock_mhz: float = 500.0
    sram_mb: int = 8
    cores: int | None = None
    links: int = 4
    pe_area_overhead: float = 0.0

    def __post_init__(self) -> None:
        if not is_power_of_two(self.core_size) or not 4 <= self.core_size <= 256:
            raise ConfigError("is not a power of two in [4, 256]", key="dynacore.core_size", value=self.core_size)
        get_datapath(self.prefill_precision, key="dynacore.prefill_precision")
        get_datapath(self.decode_precision, key="dynacore.decode_precision")
        if self.meu_policy not in ("adaptive", "fixed"):
            raise ConfigError(
                "is not an MEU policy; allowed: adaptive, fixed", key="dynacore.meu_policy", value=self.meu_policy
            )
        if self.meu_policy == "fixed":
            shape = tuple(self.meu_shape) if self.meu_shape is not None else None
            if shape is None or len(shape) != 3 or MEU(*shape) not in reachable_meus(self.core_size):
                raise ConfigError(
                    f"is not a reachable (m, n, t) of a {self.core_size}x{self.core_size} core "
                    "(m·n·t = S², powers of two, t | S/m)",
                    key="dynacore.meu_shape",
                    value=self.meu_shape,
                )
            object.__setattr__(self, "meu_shape", tuple(int(x) for x in shape))
        elif self.meu_shape is not None:
            raise ConfigError(
                "must be omitted when meu_policy is adaptive", key="dynacore.meu_shape", value=self.meu_shape
            )
        v = self.clock_mhz
        if isinstance(v, bool) or not (isinstance(v, (int, float)) and math.isfinite(v) and v > 0):
            raise ConfigError("is not a positive number", key="dynacore.clock_mhz", value=v)
        if isinstance(self.sram_mb, bool) or not isinstance(self.sram_mb, int) or self.sram_mb < 1:
            raise ConfigError("is not a positive integer (1 MB banks)", key="dynacore.sram_mb", value=self.sram_mb)
        if self.cores is not None and (
            isinstance(self.cores, bool) or not isinstance(self.cores, int) or self.cores < 1
        ):
            raise ConfigError("is not a positive integer", key="dynacore.cores", value=self.cores)
        if isinstance(self.links, bool) or not isinstance(self.links, int) or self.links < 0:
            raise ConfigError("is not a non-negative integer", key="dynacore.links", value=self.links)
        if not (isinstance(self.pe_area_overhead, (int, float)) and 0 <= self.pe_area_overhead < 10):
            raise ConfigError("is not in [0, 10)", key="dynacore.pe_area_overhead", value=self.pe_area_overhead)

    @property
    def policy(self) -> PrecisionPolicy:
        """The precision policy (named when it is one of :data:`POLICIES`)."""
        return PrecisionPolicy.of(self.prefill_precision, self.decode_precision)

    @classmethod
    def from_policy(cls, precision_policy: str, **kwargs: Any) -> DynaCoreSettings:
        """Settings with the prefill/decode datapaths of a named policy (``disaggregated``, ``fp16``...)."""
        p = get_policy(precision_policy, key="dynacore.precision_policy")
        return cls(prefill_precision=p.prefill, decode_precision=p.decode, **kwargs)

    def to_dict(self) -> dict:
        """Plain-data form."""
        d = {f: getattr(self, f) for f in self.__dataclass_fields__}
        if d["meu_shape"] is not None:
            d["meu_shape"] = list(d["meu_shape"])
        return d


_FIELDS = tuple(DynaCoreSettings.__dataclass_fields__)


def coerce_settings(obj: Any, **overrides: Any) -> DynaCoreSettings:
    """A :class:`DynaCoreSettings` from any object with (some of) its attributes (e.g. the design's copy).

    Missing attributes take the defaults; ``overrides`` win (e.g. ``cores=``).
    """
    if isinstance(obj, DynaCoreSettings) and not overrides:
        return obj
    kwargs = {f: getattr(obj, f) for f in _FIELDS if getattr(obj, f, None) is not None}
    if getattr(obj, "meu_policy", None) == "adaptive":
        kwargs.pop("meu_shape", None)
    kwargs.update(overrides)
    return DynaCoreSettings(**kwargs)


def _fallback_technology() -> TechnologyTable:
    a = AREA_28NM
    return TechnologyTable(
        name="28nm",
        node_nm=28.0,
        clock_ghz=1.0,
        cores={"tscs": CoreComponent("tscs", 256, a["mac_mm2"] * 256)},
        srams={"1M": SramComponent("1M", 2**20, a["sram_mb_gbps"], a["sram_mb_mm2"])},
        sfus={"2.4": SfuComponent("2.4", a["sfu_gops"], a["sfu_mm2"])},
        bump_mm2=((128.0, a["bump_mm2_per_gbps"] * 128),),
        phy_mm2=((128.0, a["phy_mm2_per_gbps"] * 128),),
        dma_mm2=((128.0, a["dma_mm2_per_gbps"] * 128),),
    )


_TECH: list[TechnologyTable] = []


def technology() -> TechnologyTable:
    """The 28 nm technology table of the shipped chiplet library (or the same values from :data:`AREA_28NM`)."""
    if not _TECH:
        tech = None
        try:
            from hydra_opt.hardware.chiplets import ChipletLibrary

            lib = ChipletLibrary.default()
            for name in lib.names():
                try:
                    t = lib.spec(name).technology
                except Exception:  # noqa: BLE001 - hook names have no spec
                    continue
                if t.name == "28nm" and "tscs" in t.cores and "1M" in t.srams and "2.4" in t.sfus:
                    tech = t
                    break
        except Exception:  # noqa: BLE001 - library unavailable: same numbers from the constants
            tech = None
        _TECH.append(tech or _fallback_technology())
    return _TECH[0]


def _components(settings: DynaCoreSettings) -> tuple[TechnologyTable, CoreComponent, SramComponent, SfuComponent]:
    t = technology()
    mac = t.cores["tscs"]
    s2 = settings.core_size**2
    core = CoreComponent(
        f"dynacore{settings.core_size}", s2, mac.area_mm2 / mac.macs * s2 * (1.0 + settings.pe_area_overhead)
    )
    return t, core, t.srams["1M"], t.sfus["2.4"]


def area_breakdown(settings: DynaCoreSettings, cores: int, d2d_bw_gbps: float) -> AreaBreakdown:
    """Area of a DynaCore chiplet with ``cores`` cores (shared area model), mm²."""
    t, core, sram, sfu = _components(settings)
    comp = Composition(cores, settings.sram_mb, cores, settings.links, settings.links)
    return composition_area(t, core, sram, sfu, comp, d2d_bw_gbps)


def core_area_mm2(settings: DynaCoreSettings) -> float:
    """Area of one core (PE array + its SFU) before the technology overhead, mm²."""
    _, core, _, sfu = _components(settings)
    return core.area_mm2 + sfu.area_mm2


def fixed_area_mm2(settings: DynaCoreSettings, d2d_bw_gbps: float) -> float:
    """Area of everything but the cores (D2D links, DMAs, SRAM) before the technology overhead, mm²."""
    b = area_breakdown(settings, 0, d2d_bw_gbps)
    return b.sram_mm2 + b.bump_phy_mm2 + b.dma_mm2


def cores_for_area(settings: DynaCoreSettings, slot_area_mm2: float, d2d_bw_gbps: float) -> int:
    """Cores that fit the slot after PHY/bumps/DMA/SRAM (0 if none)."""
    budget = slot_area_mm2 / (1.0 + technology().overhead_fraction)
    n = max(0, math.floor((budget - fixed_area_mm2(settings, d2d_bw_gbps)) / core_area_mm2(settings) + 1e-9))
    while n > 0 and area_breakdown(settings, n, d2d_bw_gbps).total_mm2 > slot_area_mm2 + 1e-9:
        n -= 1
    return n


def resolve_settings(settings: DynaCoreSettings, slot_area_mm2: float, d2d_bw_gbps: float) -> DynaCoreSettings:
    """Settings with ``cores`` filled from the slot's area budget (ConfigError if not even one core fits)."""
    if settings.cores is not None:
        return settings
    n = cores_for_area(settings, slot_area_mm2, d2d_bw_gbps)
    if n < 1:
        raise ConfigError(
            f"leaves no room for a {settings.core_size}x{settings.core_size} core after "
            f"{fixed_area_mm2(settings, d2d_bw_gbps):.1f} mm² of D2D/SRAM",
            key="slot_area_mm2",
            value=slot_area_mm2,
        )
    return replace(settings, cores=n)


def settings_architecture(settings: DynaCoreSettings, mem_bw_gbps: float | None = None) -> Architecture:
    """The core-model architecture of a (resolved) chiplet; DRAM bandwidth = ``mem_bw_gbps`` (default 4 TB/s)."""
    if settings.cores is None:
        raise ConfigError("must be set (use resolve_settings with the slot area)", key="dynacore.cores", value=None)
    dev = Device(settings.clock_mhz, float(settings.sram_mb), (mem_bw_gbps / 1000.0) if mem_bw_gbps else 4.0)
    meu = settings.meu_shape if settings.meu_policy == "fixed" else None
    return dynacore(settings.core_size, settings.cores, dev, meu)


def dynacore_chiplet(
    settings: DynaCoreSettings,
    slot_area_mm2: float,
    d2d_bw_gbps: float,
    families: tuple[str, ...] = ("attention", "mamba"),
) -> ChipletType:
    """The :class:`ChipletType` of a DynaCore chiplet in a slot of ``slot_area_mm2`` at ``d2d_bw_gbps`` per link.

    Peak MACs/cycle use the prefill datapath's K-packing (W8A8: 2 per PE). The element-wise unit is assumed
    ``S`` lanes wide per core (the output path); the buffer is banked per core to feed the weight port
    (``S²`` 4-bit elements per cycle per core). Families default to both: the GEMMs of Mamba blocks run on the
    arrays and their scan/convolution on the element-wise lanes (an assumption: the paper evaluates transformers
    only). Energy fields come from :mod:`hydra_opt.hardware.dynacore.energy`.
    """
    rs = resolve_settings(coerce_settings(settings), slot_area_mm2, d2d_bw_gbps)
    s, c = rs.core_size, rs.cores
    assert c is not None
    pre = get_datapath(rs.prefill_precision)
    f_ghz = rs.clock_mhz / 1000.0
    area = area_breakdown(rs, c, d2d_bw_gbps).total_mm2
    return ChipletType(
        name="dynacore",
        families=frozenset(families),
        phases=frozenset({"prefill", "decode"}),
        d2d_bw_gbps=float(d2d_bw_gbps),
        cores=c,
        clock_ghz=f_ghz,
        macs_per_cycle=float(c * s * s * pre.k_pack),
        sfu_ops_per_s=c * AREA_28NM["sfu_gops"] * 1e9,
        elem_ops_per_s=c * s * f_ghz * 1e9,
        sram_bytes=float(rs.sram_mb * 2**20),
        sram_gbps=c * (s * s * 4 / 8) * f_ghz,
        area_mm2=area,
        mac_energy_pj=DEFAULT_ENERGY.mac_pj(pre.mac_kind),
        sram_energy_pj_per_byte=DEFAULT_ENERGY.sram_pj_per_byte,
        static_power_w=DEFAULT_ENERGY.static_power_w(c * s * s, rs.sram_mb * 2**20),
    )


def phase_macs_per_cycle(settings: Any, phase: str, cores: int | None = None) -> float:
    """Peak MACs per cycle of a DynaCore chiplet in ``phase`` (``cores · S² · k_pack`` of that phase's datapath).

    :func:`dynacore_chiplet` states the prefill peak in ``ChipletType.macs_per_cycle``; a linear (roofline) pricer
    should use this for decode, where W4A16 runs FP16 arithmetic at half the W8A8 rate.
    """
    st = coerce_settings(settings, **({"cores": cores} if cores is not None else {}))
    if st.cores is None:
        raise ConfigError("must be set (use resolve_settings with the slot area)", key="dynacore.cores", value=None)
    return float(st.cores * st.core_size**2 * st.policy.datapath(phase).k_pack)


_TABLES: dict[tuple, ConfigTable] = {}


def _table(settings: DynaCoreSettings, mem_bw_gbps: float) -> ConfigTable:
    key = (settings, float(mem_bw_gbps))
    t = _TABLES.get(key)
    if t is None:
        t = ConfigTable(settings_architecture(settings, mem_bw_gbps))
        _TABLES[key] = t
    return t


def _datapath(settings: DynaCoreSettings, precision: str | Datapath) -> Datapath:
    if isinstance(precision, str) and precision in ("prefill", "decode"):
        return settings.policy.datapath(precision)
    return get_datapath(precision)


def dynacore_block_cost(
    chiplet_settings: DynaCoreSettings,
    gemms: list,
    mem_bw_gbps: float,
    precision: str | Datapath = "decode",
    *,
    cores: int | None = None,
    kv_bytes: float | None = None,
):
    """:class:`~hydra_opt.hardware.dynacore.model_cost.StepCost` of a block's GEMM list on a DynaCore chiplet.

    Args:
        chiplet_settings: :class:`DynaCoreSettings` (or the design's copy: any object with its attributes) with
            ``cores`` set (see :func:`resolve_settings` / :func:`dynacore_chiplet`) or given as ``cores=``.
        gemms: The block's :class:`~hydra_opt.workload.cost.Gemm` list (``block_gemms``).
        mem_bw_gbps: Memory bandwidth available to the chiplet for this task, GB/s.
        precision: ``"prefill"``/``"decode"`` (the settings pick the datapath) or a datapath name.
        cores: Core count (overrides the settings'; the chiplet's ``ChipletType.cores``).
        kv_bytes: KV-cache bytes the attention GEMMs stream (default: their right operands, which over-counts
            GQA-shared K/V).
    """
    st = coerce_settings(chiplet_settings, **({"cores": cores} if cores is not None else {}))
    dp = _datapath(st, precision)
    return gemm_list_cost(_table(st, mem_bw_gbps), list(gemms), dp, kv_bytes=kv_bytes)


def dynacore_block_time(
    chiplet_settings: DynaCoreSettings,
    gemms: list,
    mem_bw_gbps: float,
    precision: str | Datapath = "decode",
    *,
    cores: int | None = None,
    kv_bytes: float | None = None,
) -> float:
    """Seconds a DynaCore chiplet needs for a block's GEMM list (plans come from a cached lookup table).

    Same arguments as :func:`dynacore_block_cost`.
    """
    return dynacore_block_cost(
        chiplet_settings, gemms, mem_bw_gbps, precision, cores=cores, kv_bytes=kv_bytes
    ).latency_s


def _provider(*, d2d_bw_gbps: float, slot_area_mm2: float, settings: Any = None) -> ChipletType:
    return dynacore_chiplet(DynaCoreSettings() if settings is None else settings, slot_area_mm2, d2d_bw_gbps)


def register_provider() -> None:
    """Register ``dynacore`` with ``hydra_opt.hardware.chiplets`` (done when the package is imported)."""
    try:
        from hydra_opt.hardware.chiplets import register_chiplet_provider
    except ImportError:  # pragma: no cover - library module absent
        return
    register_chiplet_provider("dynacore", _provider)
