"""One seeded RNG tree for a run: every random draw is addressed by a path, not by call order.

``derive_seed(root, "shuffle", epoch, step)`` always gives the same number for the same path, so
sampling, shuffling and per-request seeds do not depend on which request finished first. The tree
is numpy's ``SeedSequence`` with the path hashed into its ``spawn_key``.
"""

from __future__ import annotations

import hashlib

import numpy as np

PathPart = int | str


def _path_key(path: tuple[PathPart, ...]) -> tuple[int, ...]:
    key: list[int] = []
    for part in path:
        digest = hashlib.blake2b(f"{type(part).__name__}:{part}".encode(), digest_size=8).digest()
        key.append(int.from_bytes(digest, "little"))
    return tuple(key)


def seed_sequence(root: int, *path: PathPart) -> np.random.SeedSequence:
    """The node of the tree at ``path`` below ``root``."""
    return np.random.SeedSequence(entropy=root, spawn_key=_path_key(path))


def derive_seed(root: int, *path: PathPart) -> int:
    """A 31-bit seed for the node at ``path`` (fits the ``seed`` field of OpenAI-style APIs)."""
    return int(seed_sequence(root, *path).generate_state(1, dtype=np.uint32)[0] >> 1)


def rng_at(root: int, *path: PathPart) -> np.random.Generator:
    """A generator for the node at ``path``."""
    return np.random.default_rng(seed_sequence(root, *path))
