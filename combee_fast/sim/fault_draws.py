"""Which injected fault a request of the simulated server gets, drawn from the request itself.

A fault is drawn from the server's seed, the request's body and how many times that same body
has arrived before (a retry or a resend of a request is the same body again, so it draws
afresh), never from the order in which different requests arrive. A run whose requests do not
depend on timing therefore meets the same faults however its concurrent requests interleave,
and a seeded run with faults gives the same artifact every time, as one without does.

The occurrence counts are kept for the :data:`REMEMBERED_BODIES` most recently seen bodies: a
retry follows its request within seconds, long before that many other requests arrive.
"""

from __future__ import annotations

import collections
import hashlib
import random

from combee_fast.config import FAULT_KINDS, FaultConfig

REMEMBERED_BODIES = 1 << 16


class FaultDraws:
    """Per-request fault draws for one server (module docstring)."""

    def __init__(self, config: FaultConfig, seed: int) -> None:
        self._rates = tuple(zip(FAULT_KINDS, config.rates()))
        self._active = any(rate > 0 for _, rate in self._rates)
        self._seed = seed
        self._seen: collections.OrderedDict[bytes, int] = collections.OrderedDict()

    def draw(self, body: bytes, *, is_json: bool) -> tuple[str | None, random.Random | None]:
        """The fault kind for this arrival of ``body`` (None: answered normally) and the random
        stream that shapes it (where a truncated reply is cut; None when there is no fault).
        ``malformed`` applies only to a JSON-schema request (``is_json``); drawn for another
        request it is no fault."""
        if not self._active:
            return None, None
        digest = hashlib.blake2b(body, digest_size=16).digest()
        occurrence = self._seen.pop(digest, 0)
        self._seen[digest] = occurrence + 1
        if len(self._seen) > REMEMBERED_BODIES:
            self._seen.popitem(last=False)
        rng = random.Random(f"{self._seed}/faults/{digest.hex()}/{occurrence}")
        draw = rng.random()
        for kind, rate in self._rates:
            if draw < rate:
                if kind == "malformed" and not is_json:
                    return None, None
                return kind, rng
            draw -= rate
        return None, None
