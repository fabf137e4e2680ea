"""The request names the built-in learners' roles carry: one definition, read by the learners
that declare the roles (:class:`~combee_fast.roles.spec.Role`) and by the simulated endpoint that
answers them by role. A learner of a plugin names its own roles where it declares them."""

from __future__ import annotations

ACE_GENERATOR_ROLE = "generator"
ACE_REFLECTOR_ROLE = "reflector"
ACE_CURATOR_ROLE = "curator"
ACE_REDUCER_ROLE = "reducer"

GEPA_SOLVER_ROLE = "gepa_solver"
GEPA_PROPOSER_ROLE = "gepa_proposer"
GEPA_AGGREGATOR_ROLE = "gepa_aggregator"

TEXTGRAD_FORWARD_ROLE = "textgrad_forward"
TEXTGRAD_LOSS_ROLE = "textgrad_loss"
TEXTGRAD_GRADIENT_ROLE = "textgrad_gradient"
TEXTGRAD_STEP_ROLE = "textgrad_step"
TEXTGRAD_REDUCE_ROLE = "textgrad_reduce"
