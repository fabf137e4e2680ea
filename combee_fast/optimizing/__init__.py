"""``combee_fast.optimize``: the engine's GEPA searches over the user's own metric, in one call
shaped like ``gepa.optimize``.

- :mod:`.api`: :func:`~.api.optimize` and :func:`~.api.optimize_async`: the arguments checked, the
  session opened, the search run, resumed from its run folder.
- :mod:`.rows`: plain Python rows as a task (``train`` and ``val``).
- :mod:`.row_forms`: a row written as JSON (its split's pin) and as the text a prompt shows.
- :mod:`.metric`: the user's metric call in each shape: a gepa adapter, an evaluator, ``task_lm``
  and ``metric``.
- :mod:`.user_code`: the user's code beside the loop: on threads (bounded), or awaited.
- :mod:`.calls`: GEPA's calls grading with that metric and reflecting on the records it kept.
- :mod:`.kind`: GEPA with those calls, the learner ``optimize`` runs.
- :mod:`.lm_server`: a callable language model served as an OpenAI-compatible endpoint on loopback.
- :mod:`.result`: what ``optimize`` returns.
"""

from combee_fast.optimizing.api import optimize, optimize_async
from combee_fast.optimizing.result import OptimizeResult

__all__ = ["OptimizeResult", "optimize", "optimize_async"]
