"""DynaCore: shape-adaptive output-stationary cores, their baselines and per-batch configuration search.

See ``docs/dynacore.md``. Layers: :mod:`.precision` (datapaths, policies, measured accuracy drops), :mod:`.energy`
(28 nm constants), :mod:`.core` (MEUs, cycle/traffic model), :mod:`.packing` (pyramid packing), :mod:`.search`
(Alg. 1 + lookup table), :mod:`.architectures` (DynaCore and baselines), :mod:`.model_cost` (model-level
prefill/decode), :mod:`.chiplet` (the HYDRA chiplet form), :mod:`.accuracy` (accuracy cost of a precision pair and
of a design), :mod:`.checks` (the paper's worked numbers and the Fig. 11 sweep, behind ``dynacore check/sweep``).
"""

from __future__ import annotations

from hydra_opt.hardware.dynacore.accuracy import design_accuracy_cost, pair_accuracy_cost
from hydra_opt.hardware.dynacore.architectures import (
    ARCHITECTURES,
    FIG11_ARCHITECTURES,
    bitfusion,
    dynacore,
    figlut,
    get_architecture,
    planaria,
    sara,
    simd,
    systolic,
)
from hydra_opt.hardware.dynacore.chiplet import (
    DynaCoreSettings,
    coerce_settings,
    cores_for_area,
    dynacore_block_cost,
    dynacore_block_time,
    dynacore_chiplet,
    phase_macs_per_cycle,
    resolve_settings,
    settings_architecture,
)
from hydra_opt.hardware.dynacore.core import (
    MEU,
    TABLE2_DEVICE,
    Architecture,
    Device,
    GemmCost,
    Mode,
    Part,
    gemm_cost,
    part_cost,
    reachable_meus,
    spatial_shapes,
)
from hydra_opt.hardware.dynacore.energy import DEFAULT_ENERGY, EnergyModel
from hydra_opt.hardware.dynacore.model_cost import (
    StepCost,
    decode_step,
    gemm_list_cost,
    pass_cost,
    prefill,
    saturation_batch,
)
from hydra_opt.hardware.dynacore.packing import pyramid_pack, pyramid_shapes
from hydra_opt.hardware.dynacore.precision import (
    ACCURACY_DROP_PCT,
    DATAPATHS,
    POLICIES,
    Datapath,
    PrecisionPolicy,
    accuracy_drop_pct,
    get_datapath,
    get_policy,
)
from hydra_opt.hardware.dynacore.search import DEFAULT_LAMBDA_S_PER_J, ConfigTable, search_gemm

__all__ = [
    "ARCHITECTURES",
    "FIG11_ARCHITECTURES",
    "bitfusion",
    "dynacore",
    "figlut",
    "get_architecture",
    "planaria",
    "sara",
    "simd",
    "systolic",
    "DynaCoreSettings",
    "coerce_settings",
    "cores_for_area",
    "dynacore_block_cost",
    "dynacore_block_time",
    "dynacore_chiplet",
    "phase_macs_per_cycle",
    "resolve_settings",
    "settings_architecture",
    "MEU",
    "TABLE2_DEVICE",
    "Architecture",
    "Device",
    "GemmCost",
    "Mode",
    "Part",
    "gemm_cost",
    "part_cost",
    "reachable_meus",
    "spatial_shapes",
    "DEFAULT_ENERGY",
    "EnergyModel",
    "StepCost",
    "decode_step",
    "gemm_list_cost",
    "pass_cost",
    "prefill",
    "saturation_batch",
    "pyramid_pack",
    "pyramid_shapes",
    "ACCURACY_DROP_PCT",
    "DATAPATHS",
    "POLICIES",
    "Datapath",
    "PrecisionPolicy",
    "accuracy_drop_pct",
    "design_accuracy_cost",
    "pair_accuracy_cost",
    "get_datapath",
    "get_policy",
    "DEFAULT_LAMBDA_S_PER_J",
    "ConfigTable",
    "search_gemm",
]

from hydra_opt.hardware.dynacore.chiplet import register_provider as _register_provider

_register_provider()
