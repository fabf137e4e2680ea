"""The extension points, one module per seam, each a few small Protocols beside the value types
they pass (one strategy per module):

- :mod:`.tasks`: :class:`Task`, :class:`RolloutSource`;
- :mod:`.learning`: :class:`Artifact`, :class:`Releasable`, :class:`Deployable`, :class:`Trace`,
  :class:`EpisodeTrace`, :class:`ChangeReport`, :class:`Proposer`, :class:`Learner`,
  :class:`OnlineLearning`, :class:`LearnerKind`, :class:`CompleteKind`, and what a kind builds
  from, :class:`LearnContext`;
- :mod:`.running`: :class:`Method`, :class:`BatchPlan` (and where it logs, :class:`DecisionLog`),
  :class:`StopRule` (what a stop means, :data:`Ends`, and what a run spends towards it, :class:`Budget`);
- :mod:`.rollouts`: :class:`Agent`, :class:`AgentEpisode`, :class:`Environment`,
  :class:`EnvironmentTask`, :class:`Attempts`, :class:`RolloutExecutor`;
- :mod:`.embedded`: :class:`EmbeddedLearner`;
- :mod:`.base`: :class:`LearnerBase`, a learner with a default for every member it may leave out,
  and :data:`NO_CALL` (:func:`no_call`), how a part made without a model call says so.
- :mod:`.flags`: :class:`Flag`, a command-line flag setting one field of the configuration (a
  learner kind's own flags set its settings).

Every name is also here, for a plugin that implements several.
"""

from combee_fast.protocols.base import NO_CALL, LearnerBase, no_call
from combee_fast.protocols.embedded import EmbeddedLearner
from combee_fast.protocols.flags import Flag
from combee_fast.protocols.learning import (Artifact, ChangeReport, CompleteKind, Deployable, EpisodeTrace,
                                            LearnContext, Learner, LearnerKind, OnlineLearning, Proposer, Releasable,
                                            Trace)
from combee_fast.protocols.rollouts import Agent, AgentEpisode, Attempts, Environment, EnvironmentTask, RolloutExecutor
from combee_fast.protocols.running import BatchPlan, Budget, DecisionLog, Ends, Method, StopRule
from combee_fast.protocols.tasks import RolloutSource, Task

__all__ = [
    "Agent", "AgentEpisode", "Artifact", "Attempts", "BatchPlan", "Budget", "ChangeReport", "CompleteKind",
    "DecisionLog", "Deployable", "EmbeddedLearner", "Ends", "Environment", "EnvironmentTask", "EpisodeTrace", "Flag",
    "LearnContext", "Learner", "LearnerBase", "LearnerKind", "Method", "NO_CALL", "OnlineLearning", "Proposer",
    "Releasable", "RolloutExecutor", "RolloutSource", "StopRule", "Task", "Trace", "no_call",
]
