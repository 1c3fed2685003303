"""Numeric precisions: bytes per weight, activation and KV/state element, and the compute type.

HYDRA's paper setting is ``int8`` (also ``fp8``): one byte for weights, activations, KV entries and SSM states
(the artifact's ``bytes_per_param = 1``). ``w4a16``/``w4a8`` model 4-bit weight-only quantisation (half a byte per
weight; scales and zero points are ignored).
"""

from __future__ import annotations

from dataclasses import dataclass

from hydra_opt.config.errors import ConfigError

__all__ = ["Precision", "PRECISIONS", "get_precision"]


@dataclass(frozen=True)
class Precision:
    """How many bytes each kind of tensor element takes.

    Attributes:
        name: Short name, e.g. ``"int8"``.
        weight_bytes: Bytes per weight element.
        act_bytes: Bytes per activation element (hidden vectors, intermediates).
        kv_bytes: Bytes per KV-cache element and per SSM/conv state element.
        compute: Arithmetic type of the MAC units (``"fp16"``, ``"bf16"``, ``"int8"``, ``"fp8"``).
    """

    name: str
    weight_bytes: float
    act_bytes: float
    kv_bytes: float
    compute: str


#: The known precisions by name.
PRECISIONS: dict[str, Precision] = {
    p.name: p
    for p in (
        Precision("fp16", 2.0, 2.0, 2.0, "fp16"),
        Precision("bf16", 2.0, 2.0, 2.0, "bf16"),
        Precision("int8", 1.0, 1.0, 1.0, "int8"),
        Precision("fp8", 1.0, 1.0, 1.0, "fp8"),
        Precision("w8a8", 1.0, 1.0, 1.0, "int8"),
        Precision("w4a16", 0.5, 2.0, 2.0, "fp16"),
        Precision("w4a8", 0.5, 1.0, 1.0, "int8"),
    )
}


def get_precision(name: str | Precision, *, file: str | None = None, key: str | None = None) -> Precision:
    """The :class:`Precision` called ``name`` (a :class:`Precision` is returned unchanged).

    Args:
        name: One of :data:`PRECISIONS` (case-insensitive).
        file: File to name in the error message, if the name came from a file.
        key: Key path to name in the error message.

    Raises:
        ConfigError: For an unknown name, listing the allowed ones.
    """
    if isinstance(name, Precision):
        return name
    if isinstance(name, str) and name.lower() in PRECISIONS:
        return PRECISIONS[name.lower()]
    raise ConfigError(
        f"is not a known precision; allowed: {', '.join(PRECISIONS)}", file=file, key=key or "precision", value=name
    )
