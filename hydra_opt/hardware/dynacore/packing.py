"""Pyramid packing (DynaCore paper, Sec. 7.2, Fig. 9).

A batch of ``M`` tokens is decomposed hierarchically, taking the largest reachable ``m`` that fits at each step:
``⌊M/S⌋`` full ``S``-row passes, then the binary digits of the remainder (the reachable ``m`` are the powers of two
up to ``S``). Every part fills the whole array (``m·n·t = S²``), so the array is filled exactly, and the fully
flattened ``m = 1`` shape is used at most once, for the last odd token (flattening trades weight reuse for
occupancy). Example: ``M = 11`` on a 4×4 core → 4×4, 4×4, 2×8, 1×16.
"""

from __future__ import annotations

from hydra_opt.config.errors import ConfigError

__all__ = ["pyramid_pack", "pyramid_shapes"]


def pyramid_pack(tokens: int, core_size: int, allowed_m: tuple[int, ...] | None = None) -> tuple[tuple[int, int], ...]:
    """Pyramid decomposition of ``tokens`` rows as ``((m, passes), ...)`` by decreasing ``m``.

    Args:
        tokens: The GEMM's ``M`` (≥ 1).
        core_size: The core's ``S``.
        allowed_m: Reachable ``m`` values (default: the powers of two ≤ ``S``); must contain 1.

    Returns:
        Pairs ``(m, passes)`` with ``Σ m·passes = tokens``.
    """
    if not isinstance(tokens, int) or tokens < 1:
        raise ConfigError("is not a positive token count", key="tokens", value=tokens)
    ms = sorted(allowed_m if allowed_m is not None else _powers_up_to(core_size), reverse=True)
    if 1 not in ms:
        raise ConfigError("must include m = 1 to pack any token count", key="allowed_m", value=tuple(ms))
    out = []
    left = tokens
    for m in ms:
        q, left = divmod(left, m)
        if q:
            out.append((m, q))
    return tuple(out)


def pyramid_shapes(tokens: int, core_size: int) -> tuple[tuple[int, int], ...]:
    """The packing as the list of spatial MEU shapes ``(m, n)`` (one per pass), e.g. ``M=11, S=4`` →
    ``((4, 4), (4, 4), (2, 8), (1, 16))``."""
    out = []
    for m, q in pyramid_pack(tokens, core_size):
        out.extend([(m, core_size * core_size // m)] * q)
    return tuple(out)


def _powers_up_to(size: int) -> tuple[int, ...]:
    out, m = [], 1
    while m <= size:
        out.append(m)
        m *= 2
    return tuple(out)
