"""Energy constants of the 28 nm core model (documented estimates) and the energy of one execution.

Sources and derivation (every value is an *estimate*; the DynaCore paper's synthesis and CACTI numbers (Tables 2-3)
are not in the text available to us):

* Arithmetic and SRAM: M. Horowitz, "Computing's energy problem", ISSCC 2014, 45 nm, 0.9 V: FP16 multiply
  1.1 pJ, FP32 add 0.9 pJ, INT8 multiply 0.2 pJ, INT32 add 0.1 pJ; SRAM 64-bit read 10 pJ (8 KB), 20 pJ (32 KB),
  100 pJ (1 MB). Scaled to 28 nm by the ratio of feature sizes at equal voltage (dynamic energy ~ C·V², C ~ node):
  28/45 = 0.622.

  - FP16 MAC (FP16 multiply + FP32 accumulate): (1.1 + 0.9) · 0.622 = 1.24 pJ.
  - INT8 MAC (INT8 multiply + INT32 accumulate): (0.2 + 0.1) · 0.622 = 0.19 pJ.
  - Core-local buffer access (32 KB-class banks of the 8 MB buffer): 20 pJ / 8 B · 0.622 = 1.55 pJ/byte.

* DRAM: 4 TB/s implies HBM; HBM2 costs about 3.9 pJ/bit (O'Connor et al., "Fine-Grained DRAM", MICRO 2017)
  -> 31.2 pJ/byte.
* Leakage (assumption, order of magnitude for 28 nm HPM logic/SRAM): 30 µW per PE (about 5 % of a PE's peak
  dynamic power 1.24 pJ · 500 MHz = 0.62 mW) and 50 mW per MB of SRAM.

Energy = Σ MACs · e_mac + SRAM bytes · e_sram + DRAM bytes · e_dram + static power · latency (so energy grows
with time at fixed work: the paper's leakage argument of Sec. 8.3).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["EnergyModel", "DEFAULT_ENERGY", "execution_energy_j"]

#: 45 nm -> 28 nm dynamic-energy scale (ratio of feature sizes at equal voltage).
SCALE_45_TO_28 = 28.0 / 45.0


@dataclass(frozen=True)
class EnergyModel:
    """Per-event energies and leakage of the 28 nm core model.

    Attributes:
        mac_fp16_pj: Energy of one FP16 MAC (also the W4A16 product: FP16 arithmetic), pJ.
        mac_int8_pj: Energy of one INT8 MAC, pJ.
        sram_pj_per_byte: On-chip buffer access energy, pJ/byte.
        dram_pj_per_byte: DRAM/HBM access energy, pJ/byte.
        leak_w_per_pe: Static power of one PE, W.
        leak_w_per_mb_sram: Static power of 1 MB (2**20 bytes) of on-chip buffer, W.
    """

    mac_fp16_pj: float = (1.1 + 0.9) * SCALE_45_TO_28
    mac_int8_pj: float = (0.2 + 0.1) * SCALE_45_TO_28
    sram_pj_per_byte: float = 20.0 / 8.0 * SCALE_45_TO_28
    dram_pj_per_byte: float = 3.9 * 8.0
    leak_w_per_pe: float = 30e-6
    leak_w_per_mb_sram: float = 0.05

    def mac_pj(self, mac_kind: str) -> float:
        """Energy per MAC of ``mac_kind`` (``"fp16"`` or ``"int8"``), pJ."""
        return self.mac_int8_pj if mac_kind == "int8" else self.mac_fp16_pj

    def static_power_w(self, pes: int, buffer_bytes: float) -> float:
        """Leakage of ``pes`` PEs and ``buffer_bytes`` of SRAM, W."""
        return pes * self.leak_w_per_pe + buffer_bytes / 2**20 * self.leak_w_per_mb_sram


#: The default 28 nm constants.
DEFAULT_ENERGY = EnergyModel()


def execution_energy_j(
    energy: EnergyModel,
    *,
    macs: float,
    mac_kind: str,
    sram_bytes: float,
    dram_bytes: float,
    static_power_w: float,
    latency_s: float,
) -> float:
    """Energy of one execution, J: dynamic (MACs, SRAM, DRAM) + leakage over ``latency_s``."""
    dyn_pj = (
        macs * energy.mac_pj(mac_kind) + sram_bytes * energy.sram_pj_per_byte + dram_bytes * energy.dram_pj_per_byte
    )
    return dyn_pj * 1e-12 + static_power_w * latency_s
