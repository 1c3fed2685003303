"""A workload: where request lengths come from, how requests arrive, how many, and the length caps.

Workload YAML schema (shipped ones in ``hydra_opt/data/workloads/*.yaml``; docs/workload.md)::

    name: arxiv
    description: "..."
    lengths: {profile: arxiv}              # or {trace: path/to/trace.csv, format: auto, order: file | sample}
    arrival: {process: poisson, rate_per_s: 2.0}
                                           # gamma: rate_per_s, cv; fixed: interval_s; trace: time_scale | rate_per_s
    n_requests: 1000                       # and/or horizon_s (arrivals stop at the first limit reached)
    horizon_s: null
    seed: 0
    max_total_tokens: 128000               # optional cap on prompt + output (HYDRA: 128,000)

Requests always have at least 1 prompt and 1 output token (HYDRA does the same). Truncation to
``max_total_tokens`` shortens the output first; a prompt that alone reaches the cap is cut to ``cap - 1``.
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import numpy as np

from hydra_opt.config.errors import ConfigError
from hydra_opt.config.reader import Node, load_yaml
from hydra_opt.workload.arrivals import Arrival, TraceArrival, arrival_from_node
from hydra_opt.workload.profiles import LengthProfile, load_profile
from hydra_opt.workload.traces import TRACE_FORMATS, Trace, load_trace

__all__ = ["Requests", "Workload", "TraceLengths", "load_workload", "list_workloads", "workload_from_node", "truncate"]

#: Largest request count of one workload (a typo guard).
MAX_REQUESTS = 10_000_000


@dataclass(frozen=True)
class Requests:
    """Requests of one workload sample, sorted by arrival.

    Attributes:
        arrival_s: Arrival times, s (float64, non-decreasing).
        prompt_tokens: Prompt tokens per request (int64, >= 1).
        output_tokens: Tokens to generate per request (int64, >= 1).
    """

    arrival_s: np.ndarray
    prompt_tokens: np.ndarray
    output_tokens: np.ndarray

    def __len__(self) -> int:
        return int(self.arrival_s.size)

    @property
    def total_tokens(self) -> np.ndarray:
        """Prompt + output tokens per request."""
        return self.prompt_tokens + self.output_tokens


@dataclass(frozen=True)
class TraceLengths:
    """Lengths taken from a full trace file.

    Attributes:
        trace: The loaded trace.
        order: ``"file"`` replays rows in file order from the first (HYDRA's replay); ``"sample"`` draws rows
            uniformly at random with replacement (keeps each row's prompt/output pair).
    """

    trace: Trace
    order: str = "file"


def truncate(prompt: np.ndarray, output: np.ndarray, max_total_tokens: int | None) -> tuple[np.ndarray, np.ndarray]:
    """Clamp lengths to >= 1 and, with a cap, ``prompt + output <= max_total_tokens`` (output shortened first)."""
    p = np.maximum(np.asarray(prompt, dtype=np.int64), 1)
    o = np.maximum(np.asarray(output, dtype=np.int64), 1)
    if max_total_tokens is not None:
        p = np.minimum(p, max_total_tokens - 1)
        o = np.maximum(np.minimum(o, max_total_tokens - p), 1)
    return p, o


@dataclass(frozen=True)
class Workload:
    """Request lengths + arrival process + size.

    Attributes:
        name: Workload name.
        lengths: A :class:`LengthProfile` (sampled) or :class:`TraceLengths` (a full trace).
        arrival: The arrival process.
        n_requests: Number of requests (None: as many as arrive before ``horizon_s``).
        horizon_s: Arrival horizon, s (None: no time limit).
        seed: Default seed of :meth:`requests`.
        max_total_tokens: Cap on prompt + output tokens per request (None: no cap).
        description: Free text.
    """

    name: str
    lengths: LengthProfile | TraceLengths
    arrival: Arrival
    n_requests: int | None = 1000
    horizon_s: float | None = None
    seed: int = 0
    max_total_tokens: int | None = None
    description: str = ""

    def __post_init__(self) -> None:
        if self.n_requests is None and self.horizon_s is None:
            raise ConfigError("give n_requests and/or horizon_s", key="n_requests")
        if self.max_total_tokens is not None and self.max_total_tokens < 2:
            raise ConfigError("must be >= 2", key="max_total_tokens", value=self.max_total_tokens)
        if self.arrival.needs_trace and (
            not isinstance(self.lengths, TraceLengths) or self.lengths.trace.arrival_s is None
        ):
            raise ConfigError(
                "needs lengths from a trace file with timestamps (Azure, Mooncake, vidur splitwise)",
                key="arrival.process",
                value="trace",
            )

    def requests(self, seed: int | None = None) -> Requests:
        """Draw the requests (deterministic for a given seed; default :attr:`seed`)."""
        rng = np.random.default_rng(self.seed if seed is None else seed)
        if isinstance(self.arrival, TraceArrival):
            return self._trace_timed(rng)
        t = self.arrival.times(self.n_requests, rng, self.horizon_s)
        n = t.size
        if isinstance(self.lengths, LengthProfile):
            p, o = self.lengths.sample(n, rng)
        else:
            p, o = self._trace_rows(n, rng)
        p, o = truncate(p, o, self.max_total_tokens)
        return Requests(t, p, o)

    def _trace_rows(self, n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        assert isinstance(self.lengths, TraceLengths)
        tr = self.lengths.trace
        if self.lengths.order == "file":
            idx = np.arange(n) % len(tr)  # wraps around for workloads longer than the trace
        else:
            idx = rng.integers(0, len(tr), n)
        return tr.prompt_tokens[idx], tr.output_tokens[idx]

    def _trace_timed(self, rng: np.random.Generator) -> Requests:
        assert isinstance(self.lengths, TraceLengths) and isinstance(self.arrival, TraceArrival)
        tr = self.lengths.trace
        assert tr.arrival_s is not None
        order = np.argsort(tr.arrival_s, kind="stable")
        t = tr.arrival_s[order] * self.arrival.scale_for(tr.mean_rate_per_s)
        keep = np.ones(t.size, dtype=bool)
        if self.horizon_s is not None:
            keep &= t < self.horizon_s
        idx = order[keep]
        if self.n_requests is not None:
            idx = idx[: self.n_requests]
        t = t[keep][: idx.size]
        p, o = truncate(tr.prompt_tokens[idx], tr.output_tokens[idx], self.max_total_tokens)
        return Requests(t, p, o)

    def describe(self) -> str:
        """One line: name, length source, arrivals, size."""
        src = (
            f"profile {self.lengths.name}"
            if isinstance(self.lengths, LengthProfile)
            else f"trace {Path(self.lengths.trace.path).name} ({self.lengths.order})"
        )
        size = f"{self.n_requests} requests" if self.n_requests is not None else ""
        if self.horizon_s is not None:
            size += f"{', ' if size else ''}horizon {self.horizon_s:g} s"
        return f"{self.name}: {src}; {self.arrival.describe()}; {size}"


_KEYS = ("name", "description", "lengths", "arrival", "n_requests", "horizon_s", "seed", "max_total_tokens")


def _lengths_from_node(node: Node) -> LengthProfile | TraceLengths:
    node.mapping()
    if node.has("profile") == node.has("trace"):
        raise node.error("must have exactly one of 'profile' or 'trace'", value=sorted(node.data))
    if node.has("profile"):
        pnode = node.get("profile")
        text = pnode.str()
        try:
            prof = load_profile(str(pnode.path()) if text.endswith(".json") else text)
        except ConfigError as exc:
            if exc.file is not None:
                raise
            raise ConfigError(exc.problem, file=node.file, key=pnode.key, value=text) from None
        node.done()
        return prof
    tnode = node.get("trace")
    path = tnode.path(must_exist=True)
    fmt = node.get("format", "auto").str(choices=TRACE_FORMATS)
    order = node.get("order", "file").str(choices=("file", "sample"))
    node.done()
    return TraceLengths(load_trace(path, fmt), order)


def workload_from_node(root: Node) -> Workload:
    """Build a :class:`Workload` from a parsed YAML mapping (schema in the module docstring)."""
    root.mapping()
    name = root.get("name").str(max_len=128)
    desc = root.get("description", "").str(max_len=4000)
    lengths = _lengths_from_node(root.get("lengths"))
    arrival = arrival_from_node(root.get("arrival"))
    n_node = root.get("n_requests", None)
    n = None if n_node.data is None else n_node.int(minimum=1, maximum=MAX_REQUESTS)
    h_node = root.get("horizon_s", None)
    horizon = None if h_node.data is None else h_node.number(positive=True)
    seed = root.get("seed", 0).int(minimum=0, maximum=2**63 - 1)
    c_node = root.get("max_total_tokens", None)
    cap = None if c_node.data is None else c_node.int(minimum=2, maximum=10**9)
    root.done(_KEYS)
    if n is None and horizon is None:
        raise ConfigError("give n_requests and/or horizon_s", file=root.file, key="n_requests")
    try:
        return Workload(name, lengths, arrival, n, horizon, seed, cap, desc)
    except ConfigError as exc:
        raise exc.located(file=root.file) from None


def _data_dir() -> Path:
    return Path(str(resources.files("hydra_opt") / "data" / "workloads"))


def list_workloads() -> list[str]:
    """Names of the shipped workloads."""
    return sorted(p.stem for p in _data_dir().glob("*.yaml"))


def load_workload(name_or_path: str | Path) -> Workload:
    """A shipped workload by name (``"arxiv"``, ``"hydra-arxiv"``) or a workload YAML file.

    Raises:
        ConfigError: Unknown name, unreadable file or invalid schema (located at file and key).
    """
    text = str(name_or_path)
    path = Path(text)
    if path.suffix in (".yaml", ".yml") or path.exists():
        return workload_from_node(load_yaml(path))
    shipped = _data_dir() / f"{text}.yaml"
    if not shipped.exists():
        raise ConfigError(
            f"is not a shipped workload or a YAML file; shipped: {', '.join(list_workloads())}",
            key="workload",
            value=text,
        )
    return workload_from_node(load_yaml(shipped, display=f"hydra_opt/data/workloads/{text}.yaml"))
