"""Request batching (HYDRA §IV-B): static batching and continuous (dynamic) batching with paged memory.

The policies work on plain state — a FIFO of waiting request ids, per-request length lists and a
:class:`PagedMemory` — so the simulator (``hydra_opt.evaluate.simulator``) and tests can drive them directly.

* **Static** (:class:`StaticBatcher`): wait until ``max_batch`` requests are waiting, take exactly that many, run
  the batch until its longest request finishes; finished requests leave, nobody joins (no refill). Memory for the
  whole request (prompt + requested output tokens) is reserved at admission, so static batches never preempt.
* **Continuous** (:class:`ContinuousBatcher`): whenever a batch's prefill stream is free, admit waiting requests
  while the batch has fewer than ``max_batch`` requests, the prefill pass's token count stays within
  ``token_budget`` and their memory (prompt KV pages + SSM state) fits. KV grows one page at a time during decode; if a page cannot be
  allocated the running request with the fewest generated tokens is preempted (memory freed, request re-queued,
  recomputed on resume) — vLLM-style [HYDRA ref. 16].
* **Chunked prefill** (:class:`ChunkedBatcher`, Sarathi-Serve / vLLM's default): a batch runs one pass at a time
  that carries both phases under a per-pass token budget: first every running decode (one token each), then
  prefill chunks of the admitted-but-not-yet-prefilled requests in admission order, then newly admitted requests
  while budget is left (:func:`plan_chunks`). A prompt longer than the budget is spread over several passes; its
  first token comes with the pass of its last chunk. Memory as in continuous batching.
"""

from __future__ import annotations

from array import array
from collections import deque
from collections.abc import Callable, Sequence

import numpy as np

__all__ = ["PagedMemory", "StaticBatcher", "ContinuousBatcher", "ChunkedBatcher", "plan_chunks"]


class PagedMemory:
    """Per-memory-chiplet capacity accounting in fixed-size pages of KV tokens.

    A request's footprint on memory ``h`` is ``pages·page_tokens·kv_per_token[h] + state[h]`` where ``pages`` covers
    its context; SSM/conv state is fixed per sequence, KV grows with the context (§IV-B "virtualized memory blocks").
    Pure Python over the (few) memories that hold any runtime state: it runs on every pass of every batch.

    Args:
        free_bytes: Capacity left for runtime state on each memory after weights, bytes.
        kv_bytes_per_token: KV bytes per token stored on each memory (sum over the blocks it holds).
        state_bytes: Per-sequence SSM/conv state bytes on each memory.
        page_tokens: Tokens per page.
    """

    def __init__(
        self,
        free_bytes: Sequence[float],
        kv_bytes_per_token: Sequence[float],
        state_bytes: Sequence[float],
        page_tokens: int = 16,
    ) -> None:
        self.capacity = np.asarray(free_bytes, dtype=np.float64).copy()
        n = self.capacity.size
        self._cap = [float(x) for x in self.capacity]
        # Typed arrays (the compiled simulator engine reads and grows them as C doubles, see its _grow/_alloc).
        self._used = array("d", [0.0] * n)
        self._peak = array("d", [0.0] * n)
        self.kv = [float(x) for x in kv_bytes_per_token]
        self.state = [float(x) for x in state_bytes]
        self.page_tokens = int(page_tokens)
        self.page_bytes = [k * self.page_tokens for k in self.kv]
        self._kv_idx = [h for h in range(n) if self.kv[h] > 0]
        self._st_idx = [h for h in range(n) if self.state[h] > 0]
        self._all_idx = sorted(set(self._kv_idx) | set(self._st_idx))
        self.pages: dict[int, int] = {}  # request id -> pages held (state counted once when present)

    @property
    def used(self) -> np.ndarray:
        """Bytes in use per memory (a copy)."""
        return np.array(self._used)

    @property
    def peak(self) -> np.ndarray:
        """Peak bytes in use per memory (a copy)."""
        return np.array(self._peak)

    def pages_for(self, tokens: int) -> int:
        """Pages needed to hold ``tokens`` tokens of context."""
        return -(-int(tokens) // self.page_tokens)

    def _extra(self, rid: int, tokens: int) -> tuple[int, list[tuple[int, float]]] | None:
        have = self.pages.get(rid)
        want = self.pages_for(tokens)
        if have is None:
            return want, [(h, self.state[h] + want * self.page_bytes[h]) for h in self._all_idx]
        if want <= have:
            return None
        d = want - have
        return want, [(h, d * self.page_bytes[h]) for h in self._kv_idx]

    def need(self, rid: int, tokens: int) -> np.ndarray | None:
        """Extra bytes per memory to hold ``tokens`` tokens for ``rid`` (None if nothing to add)."""
        e = self._extra(rid, tokens)
        if e is None:
            return None
        out = np.zeros(len(self._used))
        for h, x in e[1]:
            out[h] = x
        return out

    def fits(self, extra: np.ndarray) -> bool:
        """Whether ``extra`` bytes (per memory) fit on every memory."""
        return all(u + x <= c + 1e-6 for u, x, c in zip(self._used, extra, self._cap))

    def fits_all(self, wants: Sequence[tuple[int, int]]) -> bool:
        """Whether every ``(rid, tokens)`` growth fits at once."""
        tot = [0.0] * len(self._used)
        for rid, tokens in wants:
            e = self._extra(rid, tokens)
            if e is not None:
                for h, x in e[1]:
                    tot[h] += x
        return all(u + x <= c + 1e-6 for u, x, c in zip(self._used, tot, self._cap))

    def ensure(self, rid: int, tokens: int) -> bool:
        """Grow ``rid``'s allocation to cover ``tokens``; False (and nothing changed) if it would overflow."""
        e = self._extra(rid, tokens)
        if e is None:
            return True
        want, adds = e
        used, cap = self._used, self._cap
        for h, x in adds:
            if used[h] + x > cap[h] + 1e-6:
                return False
        peak = self._peak
        for h, x in adds:
            u = used[h] + x
            used[h] = u
            if u > peak[h]:
                peak[h] = u
        self.pages[rid] = want
        return True

    def free(self, rid: int) -> None:
        """Release everything ``rid`` holds."""
        have = self.pages.pop(rid, None)
        if have is None:
            return
        used = self._used
        for h in self._all_idx:
            u = used[h] - (self.state[h] + have * self.page_bytes[h])
            used[h] = u if u > 0.0 else 0.0

    def holds(self, rid: int) -> bool:
        """Whether ``rid`` currently holds memory."""
        return rid in self.pages

    def check(self) -> None:
        """Assert the invariant ``0 ≤ used ≤ capacity`` on every memory (debug mode)."""
        for u, c in zip(self._used, self._cap):
            assert -1e-3 <= u <= c + 1e-3, (self._used, self._cap)


class StaticBatcher:
    """Static batching: wait for exactly ``max_batch`` waiting requests, run to completion, no refill.

    Args:
        max_batch: Batch size B.
        reserve_tokens: ``rid -> tokens`` reserved at admission (prompt + requested output).
    """

    refills = False

    def __init__(self, max_batch: int, reserve_tokens: Callable[[int], int]) -> None:
        self.max_batch = int(max_batch)
        self.reserve_tokens = reserve_tokens

    def form(self, queue: deque[int], mem: PagedMemory) -> list[int] | None:
        """Take the first ``max_batch`` waiting requests if there are that many and their memory fits."""
        if len(queue) < self.max_batch:
            return None
        head = [queue[i] for i in range(self.max_batch)]
        if not mem.fits_all([(rid, self.reserve_tokens(rid)) for rid in head]):
            return None
        for rid in head:
            ok = mem.ensure(rid, self.reserve_tokens(rid))
            assert ok
            queue.popleft()
        return head


class ContinuousBatcher:
    """Continuous batching: admit at pass boundaries under a batch cap, a token budget and memory.

    Args:
        max_batch: Maximum requests in one batch.
        token_budget: Maximum new tokens of one prefill pass (Σq over the requests admitted together); a request
            that exceeds it alone is still admitted when no other prefill is pending, so long prompts cannot starve.
        first_pass_tokens: ``rid -> (new tokens, context tokens to hold)`` of the request's next pass if admitted.
    """

    refills = True

    def __init__(
        self, max_batch: int, token_budget: float, first_pass_tokens: Callable[[int], tuple[int, int]]
    ) -> None:
        self.max_batch = int(max_batch)
        self.token_budget = float(token_budget)
        self.first_pass_tokens = first_pass_tokens

    def form(self, queue: deque[int], mem: PagedMemory) -> list[int] | None:
        """A new batch from the head of the queue (None when nothing can be admitted)."""
        members = self.refill([], 0, queue, mem)
        return members or None

    def refill(self, members: list[int], pass_tokens: int, queue: deque[int], mem: PagedMemory) -> list[int]:
        """Admit from the head of ``queue`` into ``members`` (FCFS, stops at the first request that does not fit).

        Args:
            members: Current members (mutated: admitted ids are appended).
            pass_tokens: Prefill tokens already pending for the next prefill pass.
            queue: Waiting requests (admitted ones are removed).
            mem: Memory pools; admitted requests get their first pass's KV pages and state.

        Returns:
            ``members``.
        """
        while queue and len(members) < self.max_batch:
            rid = queue[0]
            new, hold = self.first_pass_tokens(rid)
            if pass_tokens > 0 and pass_tokens + new > self.token_budget:
                break
            if not mem.ensure(rid, hold):
                break
            queue.popleft()
            members.append(rid)
            pass_tokens += new
        return members


def plan_chunks(remaining: Sequence[int], budget: int) -> list[int]:
    """Chunk sizes of one chunked-prefill pass: in order, ``min(remaining, budget left)``; 0 once it is spent.

    Args:
        remaining: Prefill tokens each prefilling request still needs, in admission order.
        budget: Tokens left in the pass after its decodes.
    """
    out = []
    left = int(budget)
    for r in remaining:
        q = min(int(r), left) if left > 0 else 0
        out.append(q)
        left -= q
    return out


class ChunkedBatcher:
    """Chunked prefill: admission at pass boundaries while the pass's token budget has room.

    Args:
        max_batch: Maximum requests in one batch.
        token_budget: Tokens of one pass (decodes + prefill chunks).
        first_pass_tokens: ``rid -> (prefill tokens, context tokens to hold)`` if admitted now.
    """

    refills = True

    def __init__(
        self, max_batch: int, token_budget: float, first_pass_tokens: Callable[[int], tuple[int, int]]
    ) -> None:
        self.max_batch = int(max_batch)
        self.token_budget = int(token_budget)
        self.first_pass_tokens = first_pass_tokens

    def refill(self, members: list[int], room: int, queue: deque[int], mem: PagedMemory) -> list[int]:
        """Admit from the head of ``queue`` while ``room`` pass tokens are left (each admitted request's prefill
        uses up to its prompt of it), the batch has fewer than ``max_batch`` members and its memory fits."""
        while queue and room > 0 and len(members) < self.max_batch:
            rid = queue[0]
            new, hold = self.first_pass_tokens(rid)
            if not mem.ensure(rid, hold):
                break
            queue.popleft()
            members.append(rid)
            room -= new
        return members
