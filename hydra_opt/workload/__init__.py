"""workload layer: precisions, models (blocks and their linear op counts), traces, length profiles, arrivals,
workloads. See docs/workload.md."""

from __future__ import annotations

from hydra_opt.workload.arrivals import Arrival, FixedArrival, GammaArrival, PoissonArrival, TraceArrival
from hydra_opt.workload.cost import AGG_NAMES, COST_FIELDS, BlockCost, Gemm, batch_aggregates
from hydra_opt.workload.models import (
    Block,
    Model,
    block_cost,
    block_gemms,
    decode_cost,
    list_models,
    load_model,
    prefill_cost,
)
from hydra_opt.workload.precision import PRECISIONS, Precision, get_precision
from hydra_opt.workload.profiles import LengthProfile, list_profiles, load_profile
from hydra_opt.workload.traces import Trace, load_trace
from hydra_opt.workload.workload import Requests, TraceLengths, Workload, list_workloads, load_workload

__all__ = [
    "AGG_NAMES",
    "COST_FIELDS",
    "BlockCost",
    "Gemm",
    "batch_aggregates",
    "Precision",
    "PRECISIONS",
    "get_precision",
    "Block",
    "Model",
    "load_model",
    "list_models",
    "block_cost",
    "block_gemms",
    "prefill_cost",
    "decode_cost",
    "Trace",
    "load_trace",
    "LengthProfile",
    "load_profile",
    "list_profiles",
    "Arrival",
    "PoissonArrival",
    "GammaArrival",
    "FixedArrival",
    "TraceArrival",
    "Workload",
    "TraceLengths",
    "Requests",
    "load_workload",
    "list_workloads",
]
