"""The process-wide settings an embedded learner changes while it runs, and their restoration."""

from __future__ import annotations

import gc
import sys

from combee_fast.config import EmbedConfig


class HostSettings:
    """Applies :class:`~combee_fast.config.EmbedConfig`'s GIL switch interval (when
    ``switch_interval``) and young-generation GC threshold; :meth:`restore` puts back what was
    there before :meth:`apply`. Both are idempotent."""

    def __init__(self, config: EmbedConfig, *, switch_interval: bool) -> None:
        self._config = config
        self._switch_interval = switch_interval
        self._saved: tuple[float, tuple[int, int, int]] | None = None

    def apply(self) -> None:
        if self._saved is not None:
            return
        self._saved = (sys.getswitchinterval(), gc.get_threshold())
        if self._switch_interval and self._config.switch_interval_s is not None:
            sys.setswitchinterval(self._config.switch_interval_s)
        if self._config.gc_threshold0 is not None:
            gc.set_threshold(self._config.gc_threshold0, *gc.get_threshold()[1:])

    def restore(self) -> None:
        if self._saved is not None:
            interval, thresholds = self._saved
            sys.setswitchinterval(interval)
            gc.set_threshold(*thresholds)
            self._saved = None
