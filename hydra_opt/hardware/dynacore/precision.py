"""Precision datapaths of a DynaCore PE, precision policies and the quantisation accuracy cost.

A DynaCore PE is an FP16 multiply-accumulate unit whose 12-bit mantissa multiplier is built from nine 4-bit
sub-multipliers (DynaCore paper, Sec. 6.1). The *inner-product* construction re-tasks those sub-multipliers to
operands adjacent along ``K``: at INT8 two products of K-adjacent operand pairs (packed in one 16-bit input word)
are summed into the single accumulator each cycle. Precision therefore acts only on the reduction depth a PE covers
per cycle (``k_pack``) and never on the array shape (Sec. 6.2). W4A16 keeps FP16 arithmetic (one product per
cycle: the FP16 activation fills the 16-bit input word) and only shrinks the weight stream to 4 bits per element;
dequantisation happens at the buffer interface.

Baselines with an *outer-product* bit-composable PE (BitFusion) put the extra INT8 throughput into more outputs,
not along ``K``; that is modelled by their architecture (``k_pack`` override), not here.
"""

from __future__ import annotations

from dataclasses import dataclass

from hydra_opt.config.errors import ConfigError

__all__ = [
    "Datapath",
    "DATAPATHS",
    "get_datapath",
    "ALIASES",
    "PrecisionPolicy",
    "POLICIES",
    "get_policy",
    "ACCURACY_DROP_PCT",
    "accuracy_drop_pct",
]


@dataclass(frozen=True)
class Datapath:
    """How one precision runs on an inner-product PE.

    Attributes:
        name: ``"fp16"``, ``"w8a8"`` or ``"w4a16"``.
        weight_bits: Bits per weight element on the weight path (and in DRAM).
        act_bits: Bits per activation element on the input path (and per KV-cache element).
        k_pack: K-adjacent products one PE accumulates per cycle (2 for INT8 on the inner-product datapath).
        mac_kind: Arithmetic of the products: ``"fp16"`` or ``"int8"`` (selects the energy per MAC).
    """

    name: str
    weight_bits: int
    act_bits: int
    k_pack: int
    mac_kind: str

    @property
    def weight_bytes(self) -> float:
        """Bytes per weight element."""
        return self.weight_bits / 8.0

    @property
    def act_bytes(self) -> float:
        """Bytes per activation (and KV-cache) element."""
        return self.act_bits / 8.0


#: Datapaths by name (Sec. 6).
DATAPATHS: dict[str, Datapath] = {
    "fp16": Datapath("fp16", 16, 16, 1, "fp16"),
    "w8a8": Datapath("w8a8", 8, 8, 2, "int8"),
    "w4a16": Datapath("w4a16", 4, 16, 1, "fp16"),
    # QServe-style W4A8: INT8 activation pairs fill the 16-bit input word, 4-bit weights on the weight path.
    "w4a8": Datapath("w4a8", 4, 8, 2, "int8"),
}

#: Names of ``hydra_opt.workload.precision`` that run on one of the datapaths above (same operand widths).
ALIASES: dict[str, str] = {"int8": "w8a8", "bf16": "fp16"}


def get_datapath(name: str | Datapath, *, key: str = "precision", file: str | None = None) -> Datapath:
    """The :class:`Datapath` called ``name`` (case-insensitive); ConfigError listing the allowed names otherwise."""
    if isinstance(name, Datapath):
        return name
    if isinstance(name, str):
        low = ALIASES.get(name.lower(), name.lower())
        if low in DATAPATHS:
            return DATAPATHS[low]
    allowed = ", ".join([*DATAPATHS, *ALIASES])
    raise ConfigError(f"is not a DynaCore datapath; allowed: {allowed}", file=file, key=key, value=name)


@dataclass(frozen=True)
class PrecisionPolicy:
    """Which datapath each serving phase uses.

    Attributes:
        name: Policy name.
        prefill: Datapath name of the prefill phase.
        decode: Datapath name of the decode phase.
    """

    name: str
    prefill: str
    decode: str

    def datapath(self, phase: str) -> Datapath:
        """The datapath of ``phase`` (``"prefill"`` or ``"decode"``)."""
        if phase not in ("prefill", "decode"):
            raise ConfigError("is not a phase; allowed: prefill, decode", key="phase", value=phase)
        return get_datapath(self.prefill if phase == "prefill" else self.decode)

    @classmethod
    def of(cls, prefill: str, decode: str) -> PrecisionPolicy:
        """The named policy with these datapaths, or an ad-hoc one called ``"<prefill>+<decode>"``."""
        pre, dec = (
            get_datapath(prefill, key="prefill_precision").name,
            get_datapath(decode, key="decode_precision").name,
        )
        for p in POLICIES.values():
            if (p.prefill, p.decode) == (pre, dec):
                return p
        return cls(f"{pre}+{dec}", pre, dec)


#: Precision policies: one precision for both phases, or disaggregated quantisation (Sec. 2.4: W8A8 prefill on the
#: compute-bound side of the roofline, W4A16 decode on the memory-bound side).
POLICIES: dict[str, PrecisionPolicy] = {
    "fp16": PrecisionPolicy("fp16", "fp16", "fp16"),
    "w8a8": PrecisionPolicy("w8a8", "w8a8", "w8a8"),
    "w4a16": PrecisionPolicy("w4a16", "w4a16", "w4a16"),
    "w4a8": PrecisionPolicy("w4a8", "w4a8", "w4a8"),
    "disaggregated": PrecisionPolicy("disaggregated", "w8a8", "w4a16"),
}


def get_policy(
    name: str | PrecisionPolicy, *, key: str = "precision_policy", file: str | None = None
) -> PrecisionPolicy:
    """The :class:`PrecisionPolicy` called ``name``; ConfigError listing the allowed names otherwise."""
    if isinstance(name, PrecisionPolicy):
        return name
    if isinstance(name, str) and name.lower() in POLICIES:
        return POLICIES[name.lower()]
    raise ConfigError(f"is not a precision policy; allowed: {', '.join(POLICIES)}", file=file, key=key, value=name)


#: Average accuracy drop versus FP16 over ARC-e, ARC-c, BoolQ, HellaSwag, PIQA and GSM8K on Llama-3.1-8B-Instruct,
#: percentage points (DynaCore paper, Sec. 8.2 / Table 4: disaggregated W8A8+W4A16 0.07, GPTQ W8A8 0.09,
#: QServe W4A8 1.51, GPTQ W4A16 2.81). ``fp16`` is the reference (0).
ACCURACY_DROP_PCT: dict[str, float] = {
    "fp16": 0.0,
    "disaggregated": 0.07,
    "w8a8": 0.09,
    "w4a8": 1.51,
    "w4a16": 2.81,
}


def accuracy_drop_pct(policy: str | PrecisionPolicy) -> float:
    """Average accuracy drop of a precision policy vs FP16, percentage points (paper's Llama-3.1-8B figures).

    Only the paper's measurements exist, so other models reuse the Llama-3.1-8B numbers (documented in
    ``docs/dynacore.md``); use it as an objective or constraint, not as a prediction for another model.
    """
    name = policy.name if isinstance(policy, PrecisionPolicy) else str(policy).lower()
    if name not in ACCURACY_DROP_PCT:
        raise ConfigError(
            f"has no accuracy figure; allowed: {', '.join(ACCURACY_DROP_PCT)}", key="precision_policy", value=policy
        )
    return ACCURACY_DROP_PCT[name]
