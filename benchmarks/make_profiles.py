"""Regenerate the shipped length profiles ``hydra_opt/data/profiles/*.json`` from the raw traces.

Usage::

    python benchmarks/make_profiles.py [--traces ../shared/data/traces]

The raw traces are not part of the project (provenance): they live in ``shared/data/traces`` beside the clone.
Each profile keeps 1,001-point quantile tables of prompt and output tokens plus a 4,000-row rank coupling
(see ``hydra_opt/workload/profiles.py``), and names its source. Deterministic (seed 0).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from hydra_opt.workload.profiles import build_profile
from hydra_opt.workload.traces import load_trace

ROOT = Path(__file__).resolve().parents[1]

#: name -> (trace file, provenance, description)
PROFILES: dict[str, tuple[str, str, str]] = {
    "arxiv": (
        "vidur_arxiv_summarization_stats_llama2_tokenizer_filtered_v2.csv",
        "microsoft/vidur:data/processed_traces/arxiv_summarization_stats_llama2_tokenizer_filtered_v2.csv"
        "@6d98aa8f71696520acc603d87439e77cc78160a7",
        "arXiv summarization (Arxiv-4K, Llama-2 tokenizer; HYDRA's ARXIV workload)",
    ),
    "bwb": (
        "etalon_bwb_stats_llama2_tokenizer_filtered_v2.csv",
        "project-etalon/etalon:data/processed_traces/bwb_stats_llama2_tokenizer_filtered_v2.csv"
        "@10102d06d17e7763a9779b0483b41abd7fabeb3b",
        "Bilingual Web Book translation, 4K-filtered (BWB-4K, Llama-2 tokenizer; HYDRA's full BWB is longer)",
    ),
    "chat": (
        "hydra_chat1m_stats_nemo_first2286.csv",
        "ONQLin/hydra-cases-2026-artifact:dataset/chat/chat1m_stats_nemo.csv@7e608910c1abed69f82ba05ecb7f5319f98ae9a7"
        " (first 2,286 of 19,975 rows)",
        "LMSYS-Chat-1M, Nemotron tokenizer (HYDRA's CHAT workload; deterministic first-2,286-row subset)",
    ),
    "longwriter": (
        "hydra_long_writer_nemo_6k.csv",
        "ONQLin/hydra-cases-2026-artifact:dataset/longwriter/long_writer_nemo_6k.csv"
        "@7e608910c1abed69f82ba05ecb7f5319f98ae9a7",
        "LongWriter-6k, Nemotron tokenizer (HYDRA's LW workload)",
    ),
    "sharegpt": (
        "sharegpt_8k_filtered_stats_llama2_tokenizer.csv",
        "project-etalon/etalon:data/processed_traces/sharegpt_8k_filtered_stats_llama2_tokenizer.csv"
        "@10102d06d17e7763a9779b0483b41abd7fabeb3b",
        "ShareGPT conversations, 8K-filtered, Llama-2 tokenizer",
    ),
    "azure-conv": (
        "AzureLLMInferenceTrace_conv.csv",
        "Azure/AzurePublicDataset:data/AzureLLMInferenceTrace_conv.csv@790921015d50dd6aae7f7e47f39ba0e235ad6b08",
        "Azure LLM inference trace 2023, conversation (Splitwise, ISCA'24; CC-BY)",
    ),
    "azure-code": (
        "AzureLLMInferenceTrace_code.csv",
        "Azure/AzurePublicDataset:data/AzureLLMInferenceTrace_code.csv@790921015d50dd6aae7f7e47f39ba0e235ad6b08",
        "Azure LLM inference trace 2023, code (Splitwise, ISCA'24; CC-BY)",
    ),
    "mooncake-conv": (
        "mooncake_fast25_conversation_trace.jsonl",
        "kvcache-ai/Mooncake:FAST25-release/traces/conversation_trace.jsonl@3cca71daccf2a7afb8fe3f0295358f70e3a69fdb",
        "Mooncake (Kimi) conversation trace, FAST'25 release (Apache-2.0)",
    ),
}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--traces", type=Path, default=ROOT.parent / "shared" / "data" / "traces")
    ap.add_argument("--out", type=Path, default=ROOT / "hydra_opt" / "data" / "profiles")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    for name, (file, source, desc) in PROFILES.items():
        trace = load_trace(args.traces / file)
        prof = build_profile(trace, name, source, description=desc, seed=0)
        (args.out / f"{name}.json").write_text(json.dumps(prof.to_dict(), separators=(",", ":")) + "\n")
        print(f"{name}: {len(trace)} rows from {file} -> {args.out / (name + '.json')}")


if __name__ == "__main__":
    main()
