"""Loaders for the real request-trace formats, with located errors for corrupt files.

Formats (detected from the header / first character, or forced with ``format=``):

* ``vidur``: CSV with ``num_prefill_tokens``, ``num_decode_tokens`` (+ optional ``num_total_tokens``,
  ``pd_ratio``, and ``arrived_at`` in seconds for vidur's splitwise files) — vidur/etalon processed traces and the
  HYDRA chat/longwriter CSVs;
* ``azure``: CSV ``TIMESTAMP`` (``YYYY-MM-DD HH:MM:SS.fffffff``), ``ContextTokens``, ``GeneratedTokens`` — Azure
  LLM inference traces 2023;
* ``mooncake``: JSON lines with ``timestamp`` (ms), ``input_length``, ``output_length`` (``hash_ids`` ignored).

Token counts must be non-negative integers; timestamps non-negative numbers of at most :data:`MAX_TIMESTAMP_S`
seconds, non-decreasing in file order (Azure: relative to the first row). Fields longer than
:data:`MAX_FIELD_CHARS` and JSON nested deeper than :data:`MAX_JSON_DEPTH` are refused. Every problem raises :class:`~hydra_opt.config.ConfigError` naming the file, the line and the column.
"""

from __future__ import annotations

import csv
import io
import json
import math
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any
from collections.abc import Iterator

import numpy as np

from hydra_opt.config.errors import ConfigError
from hydra_opt.config.reader import read_input_bytes

__all__ = ["Trace", "load_trace", "TRACE_FORMATS"]

#: Accepted ``format`` values.
TRACE_FORMATS: tuple[str, ...] = ("auto", "vidur", "azure", "mooncake")
#: Largest trace file accepted (a mistaken path to a huge file is likelier than a 1 GB trace).
MAX_TRACE_BYTES = 512 * 1024 * 1024

#: Largest timestamp, s (over 300 years: beyond it the column is not a timestamp; 1e308 would overflow rates).
MAX_TIMESTAMP_S = 1e10
#: Longest CSV field or JSON line, characters (Python's csv module refuses fields over 128 KiB).
MAX_FIELD_CHARS = 128 * 1024
#: Deepest JSON nesting of a record ([[[...]]] of 100k levels overflows json's recursive decoder).
MAX_JSON_DEPTH = 32

_COLUMNS = {
    "vidur": ("num_prefill_tokens", "num_decode_tokens"),
    "azure": ("TIMESTAMP", "ContextTokens", "GeneratedTokens"),
    "mooncake": ("timestamp", "input_length", "output_length"),
}


@dataclass(frozen=True)
class Trace:
    """Requests of a trace file, in file order.

    Attributes:
        path: The file read.
        format: ``"vidur"``, ``"azure"`` or ``"mooncake"``.
        prompt_tokens: Prompt (prefill) tokens per request, int64 (may be 0 as in the file).
        output_tokens: Generated (decode) tokens per request, int64.
        arrival_s: Arrival times in seconds relative to the file's first request (None without timestamps).
    """

    path: str
    format: str
    prompt_tokens: np.ndarray
    output_tokens: np.ndarray
    arrival_s: np.ndarray | None = None

    def __len__(self) -> int:
        return int(self.prompt_tokens.size)

    @property
    def mean_rate_per_s(self) -> float | None:
        """Requests per second over the trace's time span (None without timestamps)."""
        if self.arrival_s is None or len(self) < 2:
            return None
        span = float(self.arrival_s.max() - self.arrival_s.min())
        return (len(self) - 1) / span if span > 0 else None


def _err(path: str, line: int, column: str | None, value: object, problem: str) -> ConfigError:
    key = f"line {line}" + (f", column {column}" if column else "")
    return ConfigError(problem, file=path, key=key, value=value)


def _read_text(path: Path, name: str) -> str:
    raw = read_input_bytes(path, name, MAX_TRACE_BYTES)
    if b"\x00" in raw[:65536]:
        raise ConfigError("contains NUL bytes: a binary file, not a CSV/JSONL trace", file=name)
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"is not UTF-8 text (byte {exc.start}): a binary file, not a trace", file=name) from None
    if not text.strip():
        raise ConfigError("is empty; expected a CSV header or JSON lines", file=name)
    return text


def _token(path: str, line: int, column: str, text: str) -> int:
    s = text.strip()
    try:
        v = int(s)
    except ValueError:
        try:
            f = float(s)
        except ValueError:
            raise _err(path, line, column, text, "is not an integer token count") from None
        if not math.isfinite(f) or f != int(f):
            raise _err(path, line, column, text, "is not an integer token count") from None
        v = int(f)
    if v < 0:
        raise _err(path, line, column, text, "is negative; token counts must be >= 0")
    if v > 2**40:  # beyond int64 arrays a huge value overflows; no request has 10^12 tokens
        raise _err(path, line, column, text, "is too large; token counts must be <= 2**40")
    return v


def _seconds(path: str, line: int, column: str, text: object, scale: float = 1.0) -> float:
    try:
        v = float(text)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise _err(path, line, column, text, "is not a number (timestamp)") from None
    if isinstance(text, bool) or not math.isfinite(v) or v < 0:
        raise _err(path, line, column, text, "is not a finite non-negative timestamp")
    if v * scale > MAX_TIMESTAMP_S:
        raise _err(path, line, column, text, f"is beyond {MAX_TIMESTAMP_S:g} s; not a timestamp")
    return v * scale


def _check_order(path: str, column: str, times: list[float], lines: list[int]) -> None:
    """Timestamps must not go back in file order (a shuffled or concatenated trace would be re-timed silently)."""
    t = np.asarray(times, dtype=np.float64)
    back = np.flatnonzero(np.diff(t) < 0)
    if back.size:
        i = int(back[0]) + 1
        raise _err(path, lines[i], column, times[i],
                   f"is earlier than the previous request's ({times[i - 1]:g} s); timestamps must be non-decreasing")


def _azure_time(path: str, line: int, text: str) -> float:
    s = text.strip()
    date, _, frac = s.partition(".")
    try:
        base = datetime.strptime(date, "%Y-%m-%d %H:%M:%S")
        f = float("0." + frac) if frac else 0.0
        if frac and not frac.isdigit():
            raise ValueError
    except ValueError:
        raise _err(path, line, "TIMESTAMP", text, "is not a timestamp 'YYYY-MM-DD HH:MM:SS[.fraction]'") from None
    return base.timestamp() + f


def _azure_times(path: str, stamps: list[str]) -> list[float]:
    """Seconds of Azure timestamps (vectorised; a bad one is located by re-parsing row by row)."""
    try:
        t = np.array([s[:26] for s in stamps], dtype="datetime64[us]")
        if np.isnat(t).any():
            raise ValueError
    except ValueError:
        return [_azure_time(path, i + 2, s) for i, s in enumerate(stamps)]
    return ((t - t.min()).astype(np.int64) * 1e-6).tolist()


def _rows(reader: Any, name: str) -> Iterator[tuple[int, list[str]]]:
    """``(line number, row)`` of a CSV reader; an over-long field is a located error, not a ``csv.Error``."""
    while True:
        try:
            row = next(reader)
        except StopIteration:
            return
        except csv.Error as exc:
            problem = (f"has a field longer than {MAX_FIELD_CHARS} characters" if "field limit" in str(exc)
                       else f"is not a CSV row ({str(exc)[:80]})")
            raise _err(name, reader.line_num, None, None, problem) from None
        yield reader.line_num, row


def _load_csv(text: str, name: str, fmt: str) -> Trace:
    reader = csv.reader(io.StringIO(text))
    first = next(_rows(reader, name), None)
    if first is None:  # pragma: no cover - empty handled earlier
        raise ConfigError("is empty", file=name)
    header = [h.strip() for h in first[1]]
    if fmt == "auto":
        fmt = "azure" if "ContextTokens" in header else "vidur"
    need = _COLUMNS[fmt]
    for col in need:
        if col not in header:
            raise _err(name, 1, col, None, f"is missing from the header; found: {', '.join(header) or '(nothing)'}")
    idx = [header.index(c) for c in need]
    t_idx = header.index("arrived_at") if fmt == "vidur" and "arrived_at" in header else None
    prompts: list[int] = []
    outputs: list[int] = []
    times: list[float] = []
    stamps: list[str] = []
    width = max(idx + ([t_idx] if t_idx is not None else [])) + 1
    lines: list[int] = []
    for lineno, row in _rows(reader, name):
        if not row or all(not c.strip() for c in row):
            continue
        if len(row) < width:
            missing = header[len(row)] if len(row) < len(header) else need[-1]
            raise _err(name, lineno, missing, None, f"is missing: the row has {len(row)} of {len(header)} columns")
        lines.append(lineno)
        if fmt == "azure":
            stamps.append(row[idx[0]].strip())
            prompts.append(_token(name, lineno, need[1], row[idx[1]]))
            outputs.append(_token(name, lineno, need[2], row[idx[2]]))
        else:
            prompts.append(_token(name, lineno, need[0], row[idx[0]]))
            outputs.append(_token(name, lineno, need[1], row[idx[1]]))
            if t_idx is not None:
                times.append(_seconds(name, lineno, "arrived_at", row[t_idx]))
    if not prompts:
        raise ConfigError("has a header but no rows", file=name)
    if stamps:
        times = _azure_times(name, stamps)
    if times:
        _check_order(name, "TIMESTAMP" if stamps else "arrived_at", times, lines)
    arrival = None
    if times:
        t = np.asarray(times, dtype=np.float64)
        arrival = t - t.min()
    return Trace(name, fmt, np.asarray(prompts, np.int64), np.asarray(outputs, np.int64), arrival)


def _json_record(name: str, lineno: int, line: str) -> Any:
    """One JSON line, refused before decoding when too long or too deeply nested (json recurses per level)."""
    if len(line) > MAX_FIELD_CHARS:
        raise _err(name, lineno, None, None, f"is longer than {MAX_FIELD_CHARS} characters; not a trace record")
    depth = 0
    for ch in line:  # brackets inside strings count too: an over-estimate, harmless for real records
        depth += (ch in "[{") - (ch in "]}")
        if depth > MAX_JSON_DEPTH:
            raise _err(name, lineno, None, None, f"is nested deeper than {MAX_JSON_DEPTH} levels; not a trace record")
    try:
        return json.loads(line)
    except json.JSONDecodeError as exc:
        raise _err(name, lineno, None, line[:40], f"is not valid JSON ({exc.msg}, column {exc.colno})") from None
    except ValueError as exc:  # an integer of more than 4,300 digits
        raise _err(name, lineno, None, line[:40], f"is not a trace record ({str(exc)[:80]})") from None


def _load_jsonl(text: str, name: str) -> Trace:
    prompts: list[int] = []
    outputs: list[int] = []
    times: list[float] = []
    lines: list[int] = []
    for lineno, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        rec = _json_record(name, lineno, line)
        if not isinstance(rec, dict):
            raise _err(name, lineno, None, line[:40], "is not a JSON object")
        for col in _COLUMNS["mooncake"]:
            if col not in rec:
                raise _err(name, lineno, col, None, f"is missing; found keys: {', '.join(map(str, rec)) or '(none)'}")
        times.append(_seconds(name, lineno, "timestamp", rec["timestamp"], 1e-3))
        for col, out in (("input_length", prompts), ("output_length", outputs)):
            v = rec[col]
            if isinstance(v, bool) or not isinstance(v, (int, float, str)):
                raise _err(name, lineno, col, v, "is not an integer token count")
            out.append(_token(name, lineno, col, str(v)))
        lines.append(lineno)
    if not prompts:
        raise ConfigError("has no JSON records", file=name)
    _check_order(name, "timestamp", times, lines)
    t = np.asarray(times, dtype=np.float64)
    return Trace(name, "mooncake", np.asarray(prompts, np.int64), np.asarray(outputs, np.int64), t - t.min())


def load_trace(path: str | Path, format: str = "auto", *, display: str | None = None) -> Trace:  # noqa: A002
    """Read a trace file.

    Args:
        path: CSV or JSONL file.
        format: One of :data:`TRACE_FORMATS`; ``auto`` decides from the content.
        display: How to name the file in error messages (default: the path).

    Raises:
        ConfigError: Missing/unreadable/binary/empty file, missing column, non-integer or negative value.
    """
    name = display or str(path)
    if format not in TRACE_FORMATS:
        raise ConfigError(f"is not a trace format; allowed: {', '.join(TRACE_FORMATS)}", key="format", value=format)
    text = _read_text(Path(path), name)
    first = text.lstrip()[:1]
    if format == "mooncake" or (format == "auto" and first == "{"):
        return _load_jsonl(text, name)
    return _load_csv(text, name, format)
