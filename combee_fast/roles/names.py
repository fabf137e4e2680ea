"""The request-role names the calls of GEPA and TextGrad carry (the ACE roles are
:data:`combee_fast.config.ROLES`): one definition, read by the learners that make the calls and by
the simulated endpoint that answers them by role."""

from __future__ import annotations

GEPA_SOLVER_ROLE = "gepa_solver"
GEPA_PROPOSER_ROLE = "gepa_proposer"
GEPA_AGGREGATOR_ROLE = "gepa_aggregator"

TEXTGRAD_FORWARD_ROLE = "textgrad_forward"
TEXTGRAD_LOSS_ROLE = "textgrad_loss"
TEXTGRAD_GRADIENT_ROLE = "textgrad_gradient"
TEXTGRAD_STEP_ROLE = "textgrad_step"
TEXTGRAD_REDUCE_ROLE = "textgrad_reduce"
TEXTGRAD_ROLES = (TEXTGRAD_FORWARD_ROLE, TEXTGRAD_LOSS_ROLE, TEXTGRAD_GRADIENT_ROLE, TEXTGRAD_STEP_ROLE,
                  TEXTGRAD_REDUCE_ROLE)
"""Every TextGrad role, in call order."""
