"""Length profiles: compact, shippable summaries of a trace's joint (prompt, output) length distribution.

A profile stores

* the 1,001-point quantile tables (levels 0, 0.001, …, 1; numpy's linear method) of prompt and of output tokens —
  the two marginals;
* a *rank coupling* (empirical copula): for a seeded subsample of K rows of the trace (K = min(rows, 4,000)),
  ``copula[i]`` is the output-length rank of the row with the i-th smallest prompt (ties broken at random). This
  keeps the prompt/output dependence (e.g. Spearman ρ) without shipping the rows.

Sampling (:meth:`LengthProfile.sample`) is *stratified*: copula cells are drawn as concatenated random
permutations of ``0..K-1`` (every cell once per K requests), then ``u = (i + U)/K``, ``v = (copula[i] + V)/K``
with independent uniforms U, V, and lengths ``Q_prompt(u)``, ``Q_output(v)`` (linear interpolation in the tables,
rounded). Each request is exactly distributed as the profile; stratification only removes the sampling noise of
the marginals across a run (a two-sample KS statistic vs the source trace of ~0.003 on 10,000 requests instead
of ~0.01–0.02 for i.i.d. draws), so different design points see the same workload up to the coupling.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import numpy as np

from hydra_opt.config.errors import ConfigError
from hydra_opt.workload.traces import Trace

__all__ = ["LengthProfile", "build_profile", "load_profile", "list_profiles", "N_LEVELS", "COPULA_ROWS"]

#: Points of each quantile table.
N_LEVELS = 1001
#: Largest rank-coupling subsample.
COPULA_ROWS = 4000
LEVELS = np.linspace(0.0, 1.0, N_LEVELS)


@dataclass(frozen=True)
class LengthProfile:
    """Quantile tables + rank coupling of a trace's prompt and output lengths (tokens).

    Attributes:
        name: Profile name, e.g. ``"arxiv"``.
        source: Provenance of the trace it was derived from (``owner/repo:path@commit``).
        trace_file: File name of the trace under ``shared/data/traces``.
        rows: Rows of the source trace.
        prompt_quantiles: Prompt tokens at levels ``linspace(0, 1, 1001)``.
        output_quantiles: Output tokens at the same levels.
        copula: Output rank of the i-th smallest prompt in the coupling subsample (a permutation of ``0..K-1``).
        mean_rate_per_s: Mean request rate of the trace when it has timestamps, else None.
        description: What the data set is.
    """

    name: str
    source: str
    trace_file: str
    rows: int
    prompt_quantiles: np.ndarray
    output_quantiles: np.ndarray
    copula: np.ndarray
    mean_rate_per_s: float | None = None
    description: str = ""

    def sample(self, n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        """``n`` (prompt, output) pairs, int64 (stratified over the coupling cells; see the module docstring)."""
        k = self.copula.size
        reps = -(-n // k)
        cells = np.concatenate([rng.permutation(k) for _ in range(reps)])[:n] if n > 0 else np.zeros(0, np.int64)
        u = (cells + rng.random(n)) / k
        v = (self.copula[cells] + rng.random(n)) / k
        prompt = np.rint(np.interp(u, LEVELS, self.prompt_quantiles)).astype(np.int64)
        output = np.rint(np.interp(v, LEVELS, self.output_quantiles)).astype(np.int64)
        return prompt, output

    def to_dict(self) -> dict:
        """JSON-serialisable form (the on-disk format)."""
        return {
            "name": self.name,
            "description": self.description,
            "source": self.source,
            "trace_file": self.trace_file,
            "rows": self.rows,
            "mean_rate_per_s": self.mean_rate_per_s,
            "levels": N_LEVELS,
            "quantile_method": "numpy linear (type 7)",
            "prompt_quantiles": [round(float(x), 3) for x in self.prompt_quantiles],
            "output_quantiles": [round(float(x), 3) for x in self.output_quantiles],
            "copula_rows": int(self.copula.size),
            "copula": [int(x) for x in self.copula],
        }

    @classmethod
    def from_dict(cls, d: dict, *, file: str = "<profile>") -> LengthProfile:
        """Inverse of :meth:`to_dict`, with validation."""
        try:
            pq = np.asarray(d["prompt_quantiles"], dtype=np.float64)
            oq = np.asarray(d["output_quantiles"], dtype=np.float64)
            cop = np.asarray(d["copula"], dtype=np.int64)
            prof = cls(
                name=str(d["name"]),
                source=str(d["source"]),
                trace_file=str(d.get("trace_file", "")),
                rows=int(d["rows"]),
                prompt_quantiles=pq,
                output_quantiles=oq,
                copula=cop,
                mean_rate_per_s=None if d.get("mean_rate_per_s") is None else float(d["mean_rate_per_s"]),
                description=str(d.get("description", "")),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise ConfigError(f"is not a valid length profile ({exc})", file=file) from None
        for key, q in (("prompt_quantiles", pq), ("output_quantiles", oq)):
            if q.shape != (N_LEVELS,) or not np.all(np.isfinite(q)) or np.any(np.diff(q) < 0) or q[0] < 0:
                raise ConfigError(f"must be {N_LEVELS} non-decreasing non-negative numbers", file=file, key=key)
        if cop.ndim != 1 or cop.size == 0 or not np.array_equal(np.sort(cop), np.arange(cop.size)):
            raise ConfigError("must be a permutation of 0..K-1", file=file, key="copula")
        return prof


def _ranks(x: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Ranks 0..n-1 with ties broken at random."""
    order = np.lexsort((rng.random(x.size), x))
    r = np.empty(x.size, dtype=np.int64)
    r[order] = np.arange(x.size)
    return r


def build_profile(
    trace: Trace, name: str, source: str, *, description: str = "", seed: int = 0, copula_rows: int = COPULA_ROWS
) -> LengthProfile:
    """Derive a :class:`LengthProfile` from a trace (deterministic for a given ``seed``)."""
    rng = np.random.default_rng(seed)
    p = trace.prompt_tokens.astype(np.float64)
    o = trace.output_tokens.astype(np.float64)
    k = min(len(trace), copula_rows)
    rows = np.sort(rng.choice(len(trace), size=k, replace=False))
    rp = _ranks(p[rows], rng)
    ro = _ranks(o[rows], rng)
    copula = np.empty(k, dtype=np.int64)
    copula[rp] = ro
    return LengthProfile(
        name=name,
        source=source,
        trace_file=Path(trace.path).name,
        rows=len(trace),
        prompt_quantiles=np.quantile(p, LEVELS),
        output_quantiles=np.quantile(o, LEVELS),
        copula=copula,
        mean_rate_per_s=trace.mean_rate_per_s,
        description=description,
    )


def _data_dir() -> Path:
    return Path(str(resources.files("hydra_opt") / "data" / "profiles"))


def list_profiles() -> list[str]:
    """Names of the shipped profiles."""
    return sorted(p.stem for p in _data_dir().glob("*.json"))


_CACHE: dict[str, LengthProfile] = {}


def load_profile(name_or_path: str | Path) -> LengthProfile:
    """A shipped profile by name (``"arxiv"``) or a profile JSON file."""
    text = str(name_or_path)
    if text in _CACHE:
        return _CACHE[text]
    path = Path(text)
    if path.suffix != ".json":
        path = _data_dir() / f"{text}.json"
        if not path.exists():
            raise ConfigError(
                f"is not a shipped length profile; shipped: {', '.join(list_profiles())}", key="profile", value=text
            )
        display = f"hydra_opt/data/profiles/{text}.json"
    else:
        display = text
        if not path.is_file():
            raise ConfigError("does not exist", file=display)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ConfigError(f"is not a JSON length profile ({exc})", file=display) from None
    if not isinstance(data, dict):
        raise ConfigError("is not a JSON object", file=display)
    prof = LengthProfile.from_dict(data, file=display)
    _CACHE[text] = prof
    return prof
