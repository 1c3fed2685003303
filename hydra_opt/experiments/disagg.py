"""Multi-device prefill/decode-disaggregated serving simulator (DynaCore paper, Sec. 8.5).

An ``n_prefill + n_decode`` device system serves a request stream:

* **Prefill pool** — one FCFS queue shared by the prefill devices. An idle device takes the oldest waiting requests
  as one batch (at most ``max_prefill_batch`` requests and ``max_prefill_tokens`` prompt tokens; a longer prompt
  runs alone) and runs it for ``prefill_s(prompts)``. Prefill produces the first token.
* **KV hand-off** — every (prefill, decode) device pair has its own point-to-point link of ``link_bw_gbps``
  (the paper's 16 GB/s inter-device links). A request's KV cache (``prompt · kv_bytes_per_token`` bytes) moves to
  the decode device with the fewest requests (running + waiting + in flight; ties → lowest index); transfers on
  one link are serialised FCFS.
* **Decode pool** — continuous batching per device: every iteration runs all resident requests (at most
  ``max_decode_batch``) for ``decode_s(contexts)``; a request whose KV has arrived joins at the next iteration
  boundary, a finished request leaves after the iteration that produced its last token.

Metrics (per request): TTFT = first-token time − arrival, where the first token counts as delivered when its KV
hand-off completes (``ttft_includes_kv_transfer=True``, default: the inter-device cost the paper says is paid
whenever the phases are split) or when prefill ends; TPOT = (finish − first token) / (output − 1) for requests
with more than one output token. Closed forms (tests): one request alone has TTFT = ``prefill_s([p]) + p ·
kv_bytes_per_token / link_bw`` and TPOT = mean over its steps ``j = 1..o−1`` of ``decode_s([p + j − 1])``.

Step times come from a :class:`PhaseCost`; :class:`DynaCoreDeviceCost` derives them from
``hydra_opt.hardware.dynacore`` (``pass_cost``), decomposed so a serving run pays a dictionary lookup and a few
floating-point operations per step (see its docstring for the decomposition and its accuracy).
"""

from __future__ import annotations

import heapq
import math
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from hydra_opt.config.errors import ConfigError

__all__ = [
    "PhaseCost",
    "DynaCoreDeviceCost",
    "DisaggOptions",
    "DisaggResult",
    "simulate_disagg",
]


class PhaseCost(Protocol):
    """Step times of one device kind."""

    def prefill_s(self, prompt_tokens: np.ndarray) -> float:
        """Latency of one prefill batch of these prompts, s."""
        ...

    def decode_s(self, contexts: np.ndarray) -> float:
        """Latency of one decode iteration of requests at these prior contexts (one new token each), s."""
        ...


def _geo_grid_index(x: float, per_octave: int) -> tuple[int, int, float]:
    """Grid points ``2**(i/per_octave)`` (rounded to integers) bracketing ``x`` and the log-space weight."""
    lx = math.log2(max(x, 1.0)) * per_octave
    lo = math.floor(lx)
    return lo, lo + 1, lx - lo


class DynaCoreDeviceCost:
    """Prefill/decode step times of one device from the DynaCore core model (``hydra_opt.hardware.dynacore``).

    Decomposition (every piece is ``pass_cost`` evaluated exactly at grid points):

    * weight GEMMs of a pass depend only on the token count ``M``: exact (cached per ``M``) for
      ``M ≤ exact_tokens``, above that linear interpolation between multiples of ``token_step`` (fixed arrays are
      tile-quantised in ``M``; at ``M > 16,384`` one 128-row tile is < 1 % of the work);
    * prefill attention of a prompt of ``p`` tokens (causal, per request): log-log interpolation on a geometric grid
      of 8 points per octave (tile quantisation of the fixed arrays: up to ≈6 % of the attention part, which is a
      small share of a prefill below ~8k tokens); a batch sums its requests (exact: their products are separate);
    * decode attention: per-request compute ``a(c)`` (same grid) summed over the batch, overlapped with streaming
      the whole batch's KV cache (``Σ (c + 1)`` keys; bytes per key from ``pass_cost``), i.e.
      ``max(Σ a(c_i), kv_s_per_key · Σ (c_i + 1))`` — the per-block ``max`` of ``gemm_list_cost`` summed over
      identical blocks.

    Args:
        arch: An ``Architecture`` or a name of ``hydra_opt.hardware.dynacore.ARCHITECTURES``.
        model: A ``hydra_opt.workload.models.Model`` or its name.
        prefill_datapath, decode_datapath: Datapaths of the two phases (e.g. ``"w8a8"``, ``"w4a16"``).
        lam: λ of the configuration search.
        exact_tokens, token_step: Weight-GEMM token grid (see above).
    """

    def __init__(
        self,
        arch: Any,
        model: Any,
        prefill_datapath: str,
        decode_datapath: str,
        *,
        lam: float | None = None,
        exact_tokens: int = 16384,
        token_step: int = 128,
    ) -> None:
        from hydra_opt.hardware.dynacore import ConfigTable, get_architecture
        from hydra_opt.workload.models import load_model

        self.arch = get_architecture(arch) if isinstance(arch, str) else arch
        self.model = load_model(model) if isinstance(model, str) else model
        self.table = ConfigTable(self.arch) if lam is None else ConfigTable(self.arch, lam=lam)
        self.prefill_dp = prefill_datapath
        self.decode_dp = decode_datapath
        self.exact_tokens = exact_tokens
        self.token_step = token_step
        self._w: dict[tuple[str, int], float] = {}
        self._att_pre: dict[int, float] = {}
        self._att_dec: dict[int, float] = {}
        self._kv_s_per_key: float | None = None

    # -- exact pieces -------------------------------------------------------------------------------------------
    def _pass(self, ctx: int, new: int, dp: str, attention: bool):
        from hydra_opt.hardware.dynacore import pass_cost

        return pass_cost(self.table, self.model, [ctx], [new], dp, attention=attention)

    def _weights_exact(self, m: int, dp: str, decode: bool) -> float:
        key = (dp, m, decode)
        v = self._w.get(key)
        if v is None:
            from hydra_opt.hardware.dynacore import pass_cost

            # Decode: m requests of one token each (the LM head runs on m rows); prefill: one prompt of m tokens
            # (LM head on its last token only).
            ctx, new = (np.zeros(m, dtype=np.int64), np.ones(m, dtype=np.int64)) if decode else ([0], [m])
            v = pass_cost(self.table, self.model, ctx, new, dp, attention=False).latency_s
            self._w[key] = v
        return v

    def weights_s(self, tokens: int, datapath: str, *, decode: bool = False) -> float:
        """Weight-GEMM time of a pass over ``tokens`` tokens (``decode``: that many one-token requests), s."""
        m = int(tokens)
        if m <= self.exact_tokens or m % self.token_step == 0:
            return self._weights_exact(m, datapath, decode)
        lo = (m // self.token_step) * self.token_step
        hi = lo + self.token_step
        f = (m - lo) / self.token_step
        return (1 - f) * self._weights_exact(lo, datapath, decode) + f * self._weights_exact(hi, datapath, decode)

    def _grid(self, cache: dict[int, float], i: int, fn) -> float:
        v = cache.get(i)
        if v is None:
            v = max(fn(max(1, round(2 ** (i / 8)))), 1e-15)
            cache[i] = v
        return v

    def _interp(self, cache: dict[int, float], x: float, fn) -> float:
        lo, hi, _ = _geo_grid_index(x, 8)
        a, b = self._grid(cache, lo, fn), self._grid(cache, hi, fn)
        xa, xb = max(1, round(2 ** (lo / 8))), max(1, round(2 ** (hi / 8)))
        if xa == xb:
            return a
        w = (math.log(x) - math.log(xa)) / (math.log(xb) - math.log(xa))
        return math.exp((1 - w) * math.log(a) + w * math.log(b))

    def _att_prefill_exact(self, p: int) -> float:
        return self._pass(0, p, self.prefill_dp, True).latency_s - self._pass(0, p, self.prefill_dp, False).latency_s

    def _att_decode_compute_exact(self, c: int) -> float:
        a, b = self._pass(c, 1, self.decode_dp, True), self._pass(c, 1, self.decode_dp, False)
        return a.compute_s - b.compute_s

    def kv_s_per_key(self) -> float:
        """Decode: DRAM time of streaming one key's K/V over all blocks, s."""
        if self._kv_s_per_key is None:
            c = 1023
            a, b = self._pass(c, 1, self.decode_dp, True), self._pass(c, 1, self.decode_dp, False)
            self._kv_s_per_key = (a.dram_s - b.dram_s) / (c + 1)
        return self._kv_s_per_key

    # -- PhaseCost ----------------------------------------------------------------------------------------------
    def prefill_s(self, prompt_tokens: np.ndarray) -> float:
        """Prefill batch latency: weights over ``Σp`` tokens + each prompt's causal attention, s."""
        p = np.asarray(prompt_tokens, dtype=np.int64)
        att = sum(self._interp(self._att_pre, float(x), self._att_prefill_exact) for x in p.tolist())
        return self.weights_s(int(p.sum()), self.prefill_dp) + att

    def decode_s(self, contexts: np.ndarray) -> float:
        """Decode iteration latency of ``len(contexts)`` requests, s."""
        c = np.asarray(contexts, dtype=np.int64)
        comp = sum(self._interp(self._att_dec, float(x), self._att_decode_compute_exact) for x in c.tolist())
        stream = self.kv_s_per_key() * float(np.sum(c + 1))
        return self.weights_s(int(c.size), self.decode_dp, decode=True) + max(comp, stream)


@dataclass(frozen=True)
class DisaggOptions:
    """Configuration of a disaggregated serving system.

    Attributes:
        n_prefill: Prefill devices.
        n_decode: Decode devices.
        link_bw_gbps: Bandwidth of each inter-device link, GB/s (1e9 bytes/s; paper: 16).
        link_latency_s: Fixed latency per KV transfer, s.
        max_prefill_batch: Requests per FCFS prefill batch.
        max_prefill_tokens: Prompt tokens per prefill batch (a longer prompt runs alone).
        max_decode_batch: Requests resident per decode device.
        ttft_includes_kv_transfer: First token counted at KV arrival (True) or at prefill end (False).
    """

    n_prefill: int = 4
    n_decode: int = 4
    link_bw_gbps: float = 16.0
    link_latency_s: float = 0.0
    max_prefill_batch: int = 8
    max_prefill_tokens: int = 8192
    max_decode_batch: int = 256
    ttft_includes_kv_transfer: bool = True

    def __post_init__(self) -> None:
        for key in ("n_prefill", "n_decode", "max_prefill_batch", "max_prefill_tokens", "max_decode_batch"):
            v = getattr(self, key)
            if not isinstance(v, (int, np.integer)) or v < 1:
                raise ConfigError("is not a positive integer", key=key, value=v)
        if not (math.isfinite(self.link_bw_gbps) and self.link_bw_gbps > 0):
            raise ConfigError("is not a positive number", key="link_bw_gbps", value=self.link_bw_gbps)
        if not (math.isfinite(self.link_latency_s) and self.link_latency_s >= 0):
            raise ConfigError("is not a non-negative number", key="link_latency_s", value=self.link_latency_s)


@dataclass(frozen=True)
class DisaggResult:
    """Per-request times and aggregates of one run (all times in s).

    Attributes:
        arrival_s, first_token_s, finish_s: Per request.
        prompt_tokens, output_tokens: Per request.
        prefill_end_s: Prefill completion per request.
        decode_device: Decode device index per request.
        prefill_busy_s, decode_busy_s: Busy time per device.
        decode_steps: Decode iterations over all decode devices.
        decode_tokens: Tokens produced by decode iterations (excludes the first tokens made by prefill).
        kv_bytes: Bytes moved over the inter-device links.
    """

    arrival_s: np.ndarray
    first_token_s: np.ndarray
    finish_s: np.ndarray
    prompt_tokens: np.ndarray
    output_tokens: np.ndarray
    prefill_end_s: np.ndarray
    decode_device: np.ndarray
    prefill_busy_s: np.ndarray
    decode_busy_s: np.ndarray
    decode_steps: int
    decode_tokens: int
    kv_bytes: float

    @property
    def ttft_s(self) -> np.ndarray:
        """Time to first token per request, s."""
        return self.first_token_s - self.arrival_s

    @property
    def tpot_s(self) -> np.ndarray:
        """Time per output token after the first, per request (NaN for one-token outputs), s."""
        n = self.output_tokens - 1
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(n > 0, (self.finish_s - self.first_token_s) / np.maximum(n, 1), np.nan)

    @property
    def ttft_mean_s(self) -> float:
        """Mean TTFT, s."""
        return float(np.mean(self.ttft_s))

    @property
    def tpot_mean_s(self) -> float:
        """Mean TPOT over requests with more than one output token, s (NaN if none)."""
        t = self.tpot_s
        t = t[np.isfinite(t)]
        return float(np.mean(t)) if t.size else float("nan")

    @property
    def makespan_s(self) -> float:
        """Last finish − first arrival, s."""
        return float(self.finish_s.max() - self.arrival_s.min()) if self.finish_s.size else 0.0

    def to_dict(self) -> dict[str, float]:
        """Aggregates with units in the keys."""
        span = max(self.makespan_s, 1e-12)
        return {
            "requests": int(self.arrival_s.size),
            "ttft_mean_s": self.ttft_mean_s,
            "ttft_p50_s": float(np.median(self.ttft_s)) if self.arrival_s.size else float("nan"),
            "ttft_p99_s": float(np.percentile(self.ttft_s, 99)) if self.arrival_s.size else float("nan"),
            "tpot_mean_s": self.tpot_mean_s,
            "makespan_s": self.makespan_s,
            "throughput_tok_s": float(self.output_tokens.sum()) / span,
            "prefill_util": float(self.prefill_busy_s.sum()) / (span * self.prefill_busy_s.size),
            "decode_util": float(self.decode_busy_s.sum()) / (span * self.decode_busy_s.size),
            "mean_decode_batch": self.decode_tokens / max(self.decode_steps, 1),
            "kv_gbytes": self.kv_bytes / 1e9,
        }


@dataclass
class _DecodeDev:
    active: list[int] = field(default_factory=list)
    waiting: list[int] = field(default_factory=list)
    incoming: int = 0
    busy: bool = False

    @property
    def load(self) -> int:
        return len(self.active) + len(self.waiting) + self.incoming


_ARRIVE, _KV, _PREFILL_DONE, _DECODE_DONE = 0, 1, 2, 3


def simulate_disagg(
    requests: Any,
    prefill_cost: PhaseCost,
    decode_cost: PhaseCost,
    kv_bytes_per_token: float,
    options: DisaggOptions | None = None,
) -> DisaggResult:
    """Serve ``requests`` on a prefill/decode-disaggregated system (module docstring).

    Args:
        requests: Anything with ``arrival_s``, ``prompt_tokens``, ``output_tokens`` arrays (e.g.
            ``hydra_opt.workload.workload.Requests``); prompts and outputs ≥ 1.
        prefill_cost: Step times of the prefill devices.
        decode_cost: Step times of the decode devices.
        kv_bytes_per_token: KV-cache bytes moved per prompt token at the hand-off.
        options: System configuration (default :class:`DisaggOptions`).

    Returns:
        Per-request times; every request finishes (no horizon).
    """
    opt = options or DisaggOptions()
    arr = np.asarray(requests.arrival_s, dtype=float)
    pr = np.asarray(requests.prompt_tokens, dtype=np.int64)
    out = np.asarray(requests.output_tokens, dtype=np.int64)
    n = arr.size
    if not (pr.size == n and out.size == n):
        raise ConfigError("arrival_s, prompt_tokens and output_tokens differ in length", key="requests")
    if n and (pr.min() < 1 or out.min() < 1):
        raise ConfigError("prompt and output tokens must be >= 1", key="requests")
    if not (math.isfinite(kv_bytes_per_token) and kv_bytes_per_token >= 0):
        raise ConfigError("is not a non-negative number", key="kv_bytes_per_token", value=kv_bytes_per_token)
    bw = opt.link_bw_gbps * 1e9
    first = np.full(n, np.nan)
    finish = np.full(n, np.nan)
    pend = np.full(n, np.nan)
    ddev = np.full(n, -1, dtype=np.int64)
    ctx = pr.copy()  # tokens in the KV cache when the next decode iteration starts
    left = out - 1  # decode iterations still to run
    p_busy = np.zeros(opt.n_prefill)
    d_busy = np.zeros(opt.n_decode)
    p_idle = list(range(opt.n_prefill))
    link_free = np.zeros((opt.n_prefill, opt.n_decode))
    devs = [_DecodeDev() for _ in range(opt.n_decode)]
    queue: list[int] = []  # FCFS prefill queue (request ids in arrival order)
    qhead = 0
    steps = tokens = 0
    kv_total = 0.0
    ev: list[tuple[float, int, int, Any]] = []
    seq = 0

    def push(t: float, kind: int, payload: Any) -> None:
        nonlocal seq
        heapq.heappush(ev, (t, seq, kind, payload))
        seq += 1

    order = np.argsort(arr, kind="stable")
    for r in order.tolist():
        push(float(arr[r]), _ARRIVE, r)

    def start_prefill(t: float) -> None:
        nonlocal qhead
        while p_idle and qhead < len(queue):
            dev = p_idle.pop(0)
            batch = [queue[qhead]]
            toks = int(pr[queue[qhead]])
            qhead += 1
            while qhead < len(queue) and len(batch) < opt.max_prefill_batch:
                nxt = queue[qhead]
                if toks + int(pr[nxt]) > opt.max_prefill_tokens:
                    break
                batch.append(nxt)
                toks += int(pr[nxt])
                qhead += 1
            dt = float(prefill_cost.prefill_s(pr[batch]))
            p_busy[dev] += dt
            push(t + dt, _PREFILL_DONE, (dev, batch))

    def start_decode(t: float, d: int) -> None:
        nonlocal steps, tokens
        dv = devs[d]
        if dv.busy:  # joins happen only at iteration boundaries
            return
        while dv.waiting and len(dv.active) < opt.max_decode_batch:
            dv.active.append(dv.waiting.pop(0))
        if not dv.active:
            return
        dt = float(decode_cost.decode_s(ctx[dv.active]))
        d_busy[d] += dt
        dv.busy = True
        steps += 1
        tokens += len(dv.active)
        push(t + dt, _DECODE_DONE, d)

    while ev:
        t, _, kind, payload = heapq.heappop(ev)
        if kind == _ARRIVE:
            queue.append(payload)
            start_prefill(t)
        elif kind == _PREFILL_DONE:
            dev, batch = payload
            p_idle.append(dev)
            p_idle.sort()
            for r in batch:
                pend[r] = t
                if not opt.ttft_includes_kv_transfer:
                    first[r] = t
                d = min(range(opt.n_decode), key=lambda i: (devs[i].load, i))
                devs[d].incoming += 1
                ddev[r] = d
                nbytes = float(pr[r]) * kv_bytes_per_token
                kv_total += nbytes
                s = max(t, link_free[dev, d])
                e = s + opt.link_latency_s + nbytes / bw
                link_free[dev, d] = e
                push(e, _KV, r)
            start_prefill(t)
        elif kind == _KV:
            r = payload
            d = int(ddev[r])
            devs[d].incoming -= 1
            if opt.ttft_includes_kv_transfer:
                first[r] = t
            if left[r] <= 0:
                finish[r] = t
                continue
            devs[d].waiting.append(r)
            start_decode(t, d)
        else:  # _DECODE_DONE
            d = payload
            dv = devs[d]
            dv.busy = False
            still: list[int] = []
            for r in dv.active:
                ctx[r] += 1
                left[r] -= 1
                if left[r] <= 0:
                    finish[r] = t
                else:
                    still.append(r)
            dv.active = still
            start_decode(t, d)

    return DisaggResult(
        arrival_s=arr,
        first_token_s=first,
        finish_s=finish,
        prompt_tokens=pr,
        output_tokens=out,
        prefill_end_s=pend,
        decode_device=ddev,
        prefill_busy_s=p_busy,
        decode_busy_s=d_busy,
        decode_steps=steps,
        decode_tokens=tokens,
        kv_bytes=kv_total,
    )
