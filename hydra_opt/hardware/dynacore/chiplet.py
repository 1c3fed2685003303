"""DynaCore as a chiplet of the HYDRA package: settings, area-limited core count, ChipletType, block pricing.

Area accounting (the same components as the other chiplets; HYDRA artifact ``component_28nm.yml`` @7e608910,
read from ``/work/shared/data/hydra_artifact``):

* PE array: 1.3129 mm² per 256 MACs (the 28 nm tensor-core unit) → ``S²`` PEs per core. The DynaCore selectors and
  inner-product INT8 mode are not in that figure (the paper's synthesis overhead, Table 2, is not in our text);
  ``pe_area_overhead`` lets a study add it.
* SRAM: 1.5336 mm² per 1 MB bank (CACTI, 96 GB/s).
* D2D: per link bump 0.238 mm² + PHY 2.56 mm² per 128 GB/s (linear), 4 links; DMA 0.0672 mm² per 128 GB/s, 4 DMAs.
* SFU: one 2.4 Gop/s unit (0.02 mm²) per core for softmax/activations.

Cores = ⌊(slot − D2D − DMA − SRAM) / (core + SFU)⌋.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

from hydra_opt.config.errors import ConfigError
from hydra_opt.hardware.dynacore.architectures import dynacore
from hydra_opt.hardware.dynacore.core import MEU, Architecture, Device, is_power_of_two, reachable_meus
from hydra_opt.hardware.dynacore.energy import DEFAULT_ENERGY
from hydra_opt.hardware.dynacore.model_cost import gemm_list_cost
from hydra_opt.hardware.dynacore.precision import DATAPATHS, POLICIES, Datapath, get_policy
from hydra_opt.hardware.dynacore.search import ConfigTable
from hydra_opt.hardware.types import ChipletType

__all__ = [
    "DynaCoreSettings",
    "AREA_28NM",
    "core_area_mm2",
    "fixed_area_mm2",
    "cores_for_area",
    "resolve_settings",
    "dynacore_chiplet",
    "settings_architecture",
    "dynacore_block_time",
    "dynacore_block_cost",
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

    Attributes:
        core_size: ``S`` of each ``S×S`` core (power of two, 4-256).
        precision_policy: ``fp16``, ``w8a8``, ``w4a16`` or ``disaggregated`` (W8A8 prefill, W4A16 decode).
        meu_policy: ``"adaptive"`` (all reachable MEUs + pyramid packing) or ``"fixed"``.
        fixed_meu: ``(m, n, t)`` when ``meu_policy == "fixed"``.
        clock_mhz: Clock, MHz.
        sram_mb: On-chip buffer, MB (1 MB banks).
        cores: Core count; ``None`` = as many as the slot's area allows (:func:`resolve_settings`).
        links: D2D links (4 on a 2-D mesh).
        pe_area_overhead: Extra PE area fraction for the reshaping/DQ logic (0 = the tensor-core MAC figure).
    """

    core_size: int = 32
    precision_policy: str = "disaggregated"
    meu_policy: str = "adaptive"
    fixed_meu: tuple[int, int, int] | None = None
    clock_mhz: float = 500.0
    sram_mb: int = 8
    cores: int | None = None
    links: int = 4
    pe_area_overhead: float = 0.0

    def __post_init__(self) -> None:
        if not is_power_of_two(self.core_size) or not 4 <= self.core_size <= 256:
            raise ConfigError("is not a power of two in [4, 256]", key="dynacore.core_size", value=self.core_size)
        if self.precision_policy not in POLICIES:
            raise ConfigError(
                f"is not a precision policy; allowed: {', '.join(POLICIES)}",
                key="dynacore.precision_policy",
                value=self.precision_policy,
            )
        if self.meu_policy not in ("adaptive", "fixed"):
            raise ConfigError("is not an MEU policy; allowed: adaptive, fixed", key="dynacore.meu_policy", value=self.meu_policy)
        if self.meu_policy == "fixed":
            if self.fixed_meu is None or MEU(*self.fixed_meu) not in reachable_meus(self.core_size):
                raise ConfigError(
                    f"is not a reachable (m, n, t) of a {self.core_size}x{self.core_size} core "
                    "(m·n·t = S², powers of two, t | S/m)",
                    key="dynacore.fixed_meu",
                    value=self.fixed_meu,
                )
            object.__setattr__(self, "fixed_meu", tuple(int(x) for x in self.fixed_meu))
        for key in ("clock_mhz",):
            v = getattr(self, key)
            if not (isinstance(v, (int, float)) and math.isfinite(v) and v > 0):
                raise ConfigError("is not a positive number", key=f"dynacore.{key}", value=v)
        if not isinstance(self.sram_mb, int) or self.sram_mb < 1:
            raise ConfigError("is not a positive integer (1 MB banks)", key="dynacore.sram_mb", value=self.sram_mb)
        if self.cores is not None and (not isinstance(self.cores, int) or self.cores < 1):
            raise ConfigError("is not a positive integer", key="dynacore.cores", value=self.cores)
        if not isinstance(self.links, int) or self.links < 0:
            raise ConfigError("is not a non-negative integer", key="dynacore.links", value=self.links)
        if not (isinstance(self.pe_area_overhead, (int, float)) and 0 <= self.pe_area_overhead < 10):
            raise ConfigError("is not in [0, 10)", key="dynacore.pe_area_overhead", value=self.pe_area_overhead)

    @classmethod
    def from_node(cls, node: Any) -> DynaCoreSettings:
        """Read settings from a :class:`hydra_opt.config.Node` mapping (unknown keys are errors)."""
        data = node.data
        if not isinstance(data, dict):
            raise node.error("is not a mapping")
        known = {f: getattr(cls, f, None) for f in cls.__dataclass_fields__}
        unknown = [k for k in data if k not in known]
        if unknown:
            raise node.error(f"unknown key; allowed: {', '.join(known)}", key=str(unknown[0]), value=unknown[0])
        kwargs = dict(data)
        if kwargs.get("fixed_meu") is not None:
            kwargs["fixed_meu"] = tuple(kwargs["fixed_meu"])
        try:
            return cls(**kwargs)
        except ConfigError as exc:
            raise ConfigError(exc.problem, file=node.file, key=exc.key, value=exc.value) from None
        except TypeError as exc:  # pragma: no cover - wrong value types
            raise node.error(f"has a value of the wrong type ({exc})") from None

    def to_dict(self) -> dict:
        """Plain-data form (YAML round trip)."""
        d = {f: getattr(self, f) for f in self.__dataclass_fields__}
        if d["fixed_meu"] is not None:
            d["fixed_meu"] = list(d["fixed_meu"])
        return d


def core_area_mm2(settings: DynaCoreSettings) -> float:
    """Area of one core (PE array + its SFU), mm²."""
    s = settings.core_size
    return s * s * AREA_28NM["mac_mm2"] * (1.0 + settings.pe_area_overhead) + AREA_28NM["sfu_mm2"]


def fixed_area_mm2(settings: DynaCoreSettings, d2d_bw_gbps: float) -> float:
    """Area of everything but the cores (D2D links, DMAs, SRAM), mm²."""
    per_link = d2d_bw_gbps * (AREA_28NM["bump_mm2_per_gbps"] + AREA_28NM["phy_mm2_per_gbps"] + AREA_28NM["dma_mm2_per_gbps"])
    return settings.links * per_link + settings.sram_mb * AREA_28NM["sram_mb_mm2"]


def cores_for_area(settings: DynaCoreSettings, slot_area_mm2: float, d2d_bw_gbps: float) -> int:
    """Cores that fit the slot after PHY/bumps/DMA/SRAM (0 if none)."""
    left = slot_area_mm2 - fixed_area_mm2(settings, d2d_bw_gbps)
    return max(0, math.floor(left / core_area_mm2(settings) + 1e-9))


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
    meu = settings.fixed_meu if settings.meu_policy == "fixed" else None
    return dynacore(settings.core_size, settings.cores, dev, meu)


def dynacore_chiplet(
    settings: DynaCoreSettings,
    slot_area_mm2: float,
    d2d_bw_gbps: float,
    families: tuple[str, ...] = ("attention",),
) -> ChipletType:
    """The :class:`ChipletType` of a DynaCore chiplet in a slot of ``slot_area_mm2`` at ``d2d_bw_gbps`` per link.

    Peak MACs/cycle use the prefill datapath's K-packing (W8A8: 2 per PE). The element-wise unit is assumed
    ``S`` lanes wide per core (the output path); the buffer is banked per core to feed the weight port
    (``S²`` 4-bit elements per cycle per core).
    """
    rs = resolve_settings(settings, slot_area_mm2, d2d_bw_gbps)
    s, c = rs.core_size, rs.cores
    assert c is not None
    pre = DATAPATHS[POLICIES[rs.precision_policy].prefill]
    f_ghz = rs.clock_mhz / 1000.0
    area = c * core_area_mm2(rs) + fixed_area_mm2(rs, d2d_bw_gbps)
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


_TABLES: dict[tuple, ConfigTable] = {}


def _table(settings: DynaCoreSettings, mem_bw_gbps: float) -> ConfigTable:
    key = (settings, float(mem_bw_gbps))
    t = _TABLES.get(key)
    if t is None:
        t = ConfigTable(settings_architecture(settings, mem_bw_gbps))
        _TABLES[key] = t
    return t


def _datapath(settings: DynaCoreSettings, precision: str | Datapath) -> Datapath:
    if isinstance(precision, Datapath):
        return precision
    if precision in ("prefill", "decode"):
        return get_policy(settings.precision_policy).datapath(precision)
    if precision in DATAPATHS:
        return DATAPATHS[precision]
    raise ConfigError(
        f"is neither a phase (prefill, decode) nor a datapath ({', '.join(DATAPATHS)})", key="precision", value=precision
    )


def dynacore_block_cost(
    chiplet_settings: DynaCoreSettings,
    gemms: list,
    mem_bw_gbps: float,
    precision: str | Datapath = "decode",
    *,
    kv_bytes: float | None = None,
):
    """:class:`~hydra_opt.hardware.dynacore.model_cost.StepCost` of a block's GEMM list on a DynaCore chiplet.

    Args:
        chiplet_settings: Resolved settings (``cores`` set; see :func:`resolve_settings`).
        gemms: The block's :class:`~hydra_opt.workload.cost.Gemm` list (``block_gemms``).
        mem_bw_gbps: Memory bandwidth available to the chiplet for this task, GB/s.
        precision: ``"prefill"``/``"decode"`` (the settings' policy picks the datapath) or a datapath name.
        kv_bytes: KV-cache bytes the attention GEMMs stream (default: their right operands, which over-counts
            GQA-shared K/V).
    """
    dp = _datapath(chiplet_settings, precision)
    return gemm_list_cost(_table(chiplet_settings, mem_bw_gbps), list(gemms), dp, kv_bytes=kv_bytes)


def dynacore_block_time(
    chiplet_settings: DynaCoreSettings,
    gemms: list,
    mem_bw_gbps: float,
    precision: str | Datapath = "decode",
    *,
    kv_bytes: float | None = None,
) -> float:
    """Seconds a DynaCore chiplet needs for a block's GEMM list (plans come from a cached lookup table)."""
    return dynacore_block_cost(chiplet_settings, gemms, mem_bw_gbps, precision, kv_bytes=kv_bytes).latency_s
