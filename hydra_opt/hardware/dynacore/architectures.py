"""DynaCore and its baselines as :class:`~hydra_opt.hardware.dynacore.core.Architecture` s on the same model.

Defaults follow the DynaCore paper's comparison (Sec. 8.1, Table 2: 28 nm, 500 MHz, 8 MB buffer, 4 TB/s) with the
same multiplier count everywhere, 16,384 (one 128×128 array; sixteen 32×32 DynaCore cores, Sec. 5):

* ``dynacore`` — ``C`` cores of ``S×S`` (default 16 × 32×32), every reachable MEU (spatial regrouping + Split-K),
  pyramid packing, inner-product mixed-precision PEs. Weight port per core: ``S²`` 4-bit elements per cycle, the
  bandwidth the fully flattened ``1×S²`` shape needs at W4 (Sec. 6.2: 4-bit weights let the same port feed four
  times as many PEs; at FP16 it feeds ``S/4`` groups).
* ``systolic`` — fixed 128×128 output-stationary array, MEU 128×128×128, with the same inner-product DQ PEs
  (the paper's "systolic array with DQ"); weight port: one stream of 128 16-bit words per cycle.
* ``planaria`` — the 128×128 array fissions conformally into 1×128², 4×64² or 16×32² sub-arrays (floor 32×32).
* ``sara`` — conformal square cells down to 4×4 (1024 sub-arrays).
* ``bitfusion`` — 128×128 bit-composable INT8 array (W8A8 only); outer-product composition puts low-precision
  throughput into outputs, not K (Sec. 6.1), so one INT8 product per multiplier per cycle.
* ``figlut`` — FIGLUT-like LUT-based FP-INT engine (W4A16 only): a fixed 128×128 array whose LUT units resolve a
  4-bit weight group of μ = 4 activations per cycle over q = 4 bit planes, i.e. one FP16×INT4 product per unit per
  cycle (μ/q = 1).
* ``simd`` — vector device: 128 lanes of 128-wide dot-product units (MEU 1×1×128, adder tree of 7 levels), no
  weight reuse across tokens; weight port equal to the DynaCore device's total (128 × 128 4-bit elements/cycle).
"""

from __future__ import annotations

from collections.abc import Callable

from hydra_opt.config.errors import ConfigError
from hydra_opt.hardware.dynacore.core import (
    MEU,
    TABLE2_DEVICE,
    Architecture,
    Device,
    Mode,
    is_power_of_two,
    reachable_meus,
)

__all__ = [
    "dynacore",
    "systolic",
    "planaria",
    "sara",
    "bitfusion",
    "figlut",
    "simd",
    "ARCHITECTURES",
    "FIG11_ARCHITECTURES",
    "get_architecture",
]

#: Datapaths of the inner-product mixed-precision PE (DynaCore, and the same PE in the fixed/Planaria/SARA arrays).
INNER_PRODUCT_DATAPATHS: tuple[str, ...] = ("fp16", "w8a8", "w4a16", "w4a8")

#: Bits of a PE's operand word (FP16 / two packed INT8 / four packed INT4).
WORD_BITS = 16


def _pow2(value: int, key: str) -> int:
    if not is_power_of_two(value):
        raise ConfigError("is not a power of two", key=key, value=value)
    return value


def dynacore(
    core_size: int = 32,
    cores: int = 16,
    device: Device = TABLE2_DEVICE,
    meu: tuple[int, int, int] | None = None,
    *,
    split_k: bool = True,
    pyramid: bool = True,
) -> Architecture:
    """A DynaCore device.

    Args:
        core_size: ``S`` of each ``S×S`` core (power of two).
        cores: Number of cores ``C``.
        device: Clock, buffer, DRAM bandwidth.
        meu: ``None`` for the adaptive policy (all reachable MEUs + pyramid packing), or a fixed ``(m, n, t)``.
        split_k: Allow Split-K MEUs (``t > 1``); False = spatial regrouping only (the paper's ablation step).
        pyramid: Pyramid packing (False = one padded MEU per GEMM).
    """
    s = _pow2(core_size, "core_size")
    if not isinstance(cores, int) or cores < 1:
        raise ConfigError("is not a positive integer", key="cores", value=cores)
    meus = reachable_meus(s) if split_k else tuple(u for u in reachable_meus(s) if u.t == 1)
    name = (
        "dynacore"
        if (split_k and pyramid)
        else f"dynacore[{'splitk' if split_k else 'spatial'}" + (",pyramid]" if pyramid else "]")
    )
    if meu is not None:
        fixed = MEU(*meu)
        if fixed not in meus:
            raise ConfigError(
                f"is not reachable on a {s}x{s} core; allowed: {', '.join(str(u) for u in meus)}",
                key="meu",
                value=tuple(meu),
            )
        meus, pyramid, name = (fixed,), False, f"dynacore[{fixed}]"
    mode = Mode(f"{cores}x{s}x{s}", cores, s, s, meus, weight_port_bits=s * s * 4)
    return Architecture(name, (mode,), datapaths=INNER_PRODUCT_DATAPATHS, pyramid=pyramid, device=device)


def _square_modes(size: int, min_size: int) -> tuple[Mode, ...]:
    size, min_size = _pow2(size, "array_size"), _pow2(min_size, "min_size")
    if min_size > size:
        raise ConfigError(f"exceeds the array size {size}", key="min_size", value=min_size)
    modes, s = [], size
    while s >= min_size:
        c = (size // s) ** 2
        modes.append(Mode(f"{c}x{s}x{s}", c, s, s, (MEU(s, s, 1),), weight_port_bits=s * WORD_BITS))
        s //= 2
    return tuple(modes)


def systolic(size: int = 128, device: Device = TABLE2_DEVICE) -> Architecture:
    """Fixed ``size×size`` output-stationary array with inner-product DQ PEs (MEU size×size×size)."""
    return Architecture("systolic", _square_modes(size, size), datapaths=INNER_PRODUCT_DATAPATHS, device=device)


def planaria(size: int = 128, min_size: int = 32, device: Device = TABLE2_DEVICE) -> Architecture:
    """Planaria-style conformal fission of a ``size×size`` array down to ``min_size`` sub-arrays."""
    return Architecture("planaria", _square_modes(size, min_size), datapaths=INNER_PRODUCT_DATAPATHS, device=device)


def sara(size: int = 128, min_size: int = 4, device: Device = TABLE2_DEVICE) -> Architecture:
    """SARA-style square cells of ``min_size`` composable up to ``size×size``."""
    return Architecture("sara", _square_modes(size, min_size), datapaths=INNER_PRODUCT_DATAPATHS, device=device)


def bitfusion(size: int = 128, device: Device = TABLE2_DEVICE) -> Architecture:
    """BitFusion-style bit-composable INT8 array (W8A8 only, outer-product composition)."""
    return Architecture("bitfusion", _square_modes(size, size), datapaths=("w8a8",), outer_product=True, device=device)


def figlut(size: int = 128, device: Device = TABLE2_DEVICE) -> Architecture:
    """FIGLUT-like LUT FP-INT engine (W4A16 only), a fixed ``size×size`` array of LUT units."""
    return Architecture("figlut", _square_modes(size, size), datapaths=("w4a16",), device=device)


def simd(lanes: int = 128, width: int = 128, device: Device = TABLE2_DEVICE) -> Architecture:
    """Vector device: ``lanes`` dot-product units of ``width`` multipliers each."""
    _pow2(width, "width")
    mode = Mode(f"{lanes}x{width}", lanes, 1, 1, (MEU(1, 1, width),), weight_port_bits=width * 4, kind="simd")
    return Architecture("simd", (mode,), datapaths=INNER_PRODUCT_DATAPATHS, device=device)


#: Builders by name; each accepts ``device=``.
ARCHITECTURES: dict[str, Callable[..., Architecture]] = {
    "dynacore": dynacore,
    "systolic": systolic,
    "planaria": planaria,
    "sara": sara,
    "bitfusion": bitfusion,
    "figlut": figlut,
    "simd": simd,
}

#: The four architectures of the paper's Fig. 11 batching analysis.
FIG11_ARCHITECTURES: tuple[str, ...] = ("systolic", "planaria", "sara", "dynacore")


def get_architecture(name: str, device: Device = TABLE2_DEVICE, **kwargs) -> Architecture:
    """Build the architecture called ``name`` on ``device``; ConfigError listing the names otherwise."""
    if name not in ARCHITECTURES:
        raise ConfigError(
            f"is not an architecture; allowed: {', '.join(ARCHITECTURES)}", key="architecture", value=name
        )
    return ARCHITECTURES[name](device=device, **kwargs)
