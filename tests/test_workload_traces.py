"""Trace loaders on the real files (vs the curator's independent statistics) and on corrupt files."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from hydra_opt.config import ConfigError
from hydra_opt.workload.traces import load_trace

ROOT = Path(__file__).resolve().parents[1]
TRACES = ROOT.parent / "shared" / "data" / "traces"
needs_shared = pytest.mark.skipif(
    not TRACES.is_dir(), reason=f"{TRACES} absent: CI clones ../shared beside the repository for the real traces"
)

REAL = [
    ("vidur_arxiv_summarization_stats_llama2_tokenizer_filtered_v2.csv", "vidur", False),
    ("etalon_bwb_stats_llama2_tokenizer_filtered_v2.csv", "vidur", False),
    ("sharegpt_8k_filtered_stats_llama2_tokenizer.csv", "vidur", False),
    ("hydra_chat1m_stats_nemo_first2286.csv", "vidur", False),
    ("hydra_long_writer_nemo_6k.csv", "vidur", False),
    ("AzureLLMInferenceTrace_code.csv", "azure", True),
    ("AzureLLMInferenceTrace_conv.csv", "azure", True),
    ("vidur_splitwise_code.csv", "vidur", True),
    ("vidur_splitwise_conv.csv", "vidur", True),
    ("mooncake_fast25_conversation_trace.jsonl", "mooncake", True),
    ("mooncake_fast25_synthetic_trace.jsonl", "mooncake", True),
]


@needs_shared
@pytest.mark.parametrize(("file", "fmt", "timed"), REAL, ids=[r[0].split(".")[0] for r in REAL])
def test_real_trace_matches_curator_stats(file: str, fmt: str, timed: bool) -> None:
    stats = json.loads((TRACES / "trace_stats.json").read_text())[file]
    tr = load_trace(TRACES / file)
    assert tr.format == fmt and len(tr) == stats["rows"]
    for arr, key in ((tr.prompt_tokens, "prompt_tokens"), (tr.output_tokens, "output_tokens")):
        s = stats[key]
        assert arr.dtype == np.int64
        assert round(float(arr.mean()), 1) == pytest.approx(s["mean"], abs=0.06)
        assert float(np.median(arr)) == s["median"] and arr.min() == s["min"] and arr.max() == s["max"]
    assert (tr.arrival_s is not None) == timed
    if timed:
        assert tr.arrival_s.min() == 0.0
        if "mean_rate_req_per_s" in stats:
            assert tr.mean_rate_per_s == pytest.approx(stats["mean_rate_req_per_s"], abs=2e-3)


@needs_shared
def test_splitwise_equals_azure_row_by_row() -> None:
    az = load_trace(TRACES / "AzureLLMInferenceTrace_code.csv")
    vs = load_trace(TRACES / "vidur_splitwise_code.csv")
    assert np.array_equal(az.prompt_tokens, vs.prompt_tokens) and np.array_equal(az.output_tokens, vs.output_tokens)
    assert np.allclose(az.arrival_s, vs.arrival_s, atol=1e-3)


def _write(tmp_path: Path, name: str, content: str | bytes) -> Path:
    p = tmp_path / name
    p.write_bytes(content if isinstance(content, bytes) else content.encode())
    return p


def test_small_formats_parse(tmp_path: Path) -> None:
    v = load_trace(_write(tmp_path, "v.csv", "num_prefill_tokens,num_decode_tokens\n10,5\n7.0,3\n"))
    assert v.prompt_tokens.tolist() == [10, 7] and v.output_tokens.tolist() == [5, 3] and v.arrival_s is None
    a = load_trace(
        _write(
            tmp_path,
            "a.csv",
            "TIMESTAMP,ContextTokens,GeneratedTokens\n"
            "2023-11-16 18:17:03.5000000,100,2\n2023-11-16 18:17:05.2500000,50,1\n",
        )
    )
    assert a.arrival_s.tolist() == pytest.approx([0.0, 1.75])
    m = load_trace(
        _write(
            tmp_path,
            "m.jsonl",
            '{"timestamp": 1000, "input_length": 5, "output_length": 6}\n'
            '{"timestamp": 3500, "input_length": 7, "output_length": 8}\n',
        )
    )
    assert m.arrival_s.tolist() == [0.0, 2.5] and m.prompt_tokens.tolist() == [5, 7]


CORRUPT = [
    ("missing_col.csv", "num_prefill_tokens,foo\n1,2\n", ["line 1", "num_decode_tokens", "missing"]),
    (
        "nonint.csv",
        "num_prefill_tokens,num_decode_tokens\n10,5\n12,abc\n",
        ["line 3", "num_decode_tokens", "'abc'", "integer"],
    ),
    ("frac.csv", "num_prefill_tokens,num_decode_tokens\n10.5,5\n", ["line 2", "num_prefill_tokens", "integer"]),
    (
        "neg.csv",
        "num_prefill_tokens,num_decode_tokens\n10,5\n3,1\n-4,2\n",
        ["line 4", "num_prefill_tokens", "negative"],
    ),
    ("short.csv", "num_prefill_tokens,num_decode_tokens\n10\n", ["line 2", "num_decode_tokens", "missing"]),
    ("empty.csv", "", ["empty"]),
    ("header_only.csv", "num_prefill_tokens,num_decode_tokens\n", ["no rows"]),
    ("binary.csv", b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR", ["binary"]),
    ("latin1.csv", b"num_prefill_tokens,num_decode_tokens\n1,\xe9\n", ["UTF-8"]),
    (
        "azure_time.csv",
        "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:17:03.5,1,2\nyesterday,3,4\n",
        ["line 3", "TIMESTAMP", "'yesterday'"],
    ),
    ("bad_time.csv", "arrived_at,num_prefill_tokens,num_decode_tokens\n0.0,1,2\n-1,3,4\n", ["line 3", "arrived_at"]),
    (
        "bad.jsonl",
        '{"timestamp": 0, "input_length": 5, "output_length": 6}\n{"timestamp": 1, "input_length": 5\n',
        ["line 2", "not valid JSON"],
    ),
    ("nokey.jsonl", '{"timestamp": 0, "input_length": 5}\n', ["line 1", "output_length", "missing"]),
    (
        "strval.jsonl",
        '{"timestamp": 0, "input_length": "many", "output_length": 6}\n',
        ["line 1", "input_length", "integer"],
    ),
    ("negts.jsonl", '{"timestamp": -5, "input_length": 1, "output_length": 6}\n', ["line 1", "timestamp"]),
]


@pytest.mark.parametrize(("name", "content", "words"), CORRUPT, ids=[c[0] for c in CORRUPT])
def test_corrupt_trace_error_names_file_line_column(tmp_path: Path, name: str, content, words: list[str]) -> None:
    path = _write(tmp_path, name, content)
    with pytest.raises(ConfigError) as ei:
        load_trace(path)
    msg = str(ei.value)
    assert name in msg
    for w in words:
        assert w in msg, (w, msg)


def test_missing_file_and_bad_format(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="does not exist"):
        load_trace(tmp_path / "nope.csv")
    with pytest.raises(ConfigError, match="allowed: auto, vidur"):
        load_trace(tmp_path / "nope.csv", format="parquet")
