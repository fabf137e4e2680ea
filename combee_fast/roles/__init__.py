"""The four ACE roles: prompt building and output parsing for generator, reflector, curator,
reducer, and the calls that make them.

- :mod:`.generator`, :mod:`.reflector`, :mod:`.curator`, :mod:`.reducer`: each role's messages,
  schema and parser (its system message is its prompt file in ``prompts/``; its user message is
  filled from a template there, with the content the task world and a real model read between tags).
- :mod:`.ops`: the operations format shared by the curator and the reducer.
- :mod:`.base`: what the roles share (prompt files, filling templates, JSON out of model output).
- :mod:`.bounds`: bounds that make each schema a grammar a model cannot loop in.
- :mod:`.budget`: prompts that fit the endpoint's context.
- :mod:`.trajectory`: an agent's trajectory as the reflector reads it, within a budget.
- :mod:`.agents`: :class:`~.agents.Agents`, the role calls of one run (seeded by path).
- :mod:`.names`: the request-role names of the GEPA and TextGrad calls (one definition for the
  learners and the simulated endpoint).
- :mod:`.clients`: the role map (endpoints, replicas, seed, sampling) and the one place role
  clients are built from it.
"""

from combee_fast.roles.curator import (
    CURATOR_MAX_TOKENS,
    CURATOR_SCHEMA,
    curator_messages,
    playbook_stats_text,
    reflection_json_line,
)
from combee_fast.roles.generator import (
    GENERATOR_MAX_TOKENS,
    GENERATOR_SCHEMA,
    GeneratorOutput,
    generator_messages,
    parse_generator,
)
from combee_fast.roles.ops import OPS_SCHEMA, parse_ops
from combee_fast.roles.reducer import REDUCER_MAX_TOKENS, REDUCER_SCHEMA, reducer_messages
from combee_fast.roles.reflector import (
    REFLECTOR_MAX_TOKENS,
    REFLECTOR_SCHEMA,
    cited_bullets_text,
    parse_reflector,
    reflector_messages,
)

__all__ = [
    "CURATOR_MAX_TOKENS",
    "CURATOR_SCHEMA",
    "GENERATOR_MAX_TOKENS",
    "GENERATOR_SCHEMA",
    "OPS_SCHEMA",
    "REDUCER_MAX_TOKENS",
    "REDUCER_SCHEMA",
    "REFLECTOR_MAX_TOKENS",
    "REFLECTOR_SCHEMA",
    "GeneratorOutput",
    "cited_bullets_text",
    "curator_messages",
    "generator_messages",
    "parse_generator",
    "parse_ops",
    "parse_reflector",
    "playbook_stats_text",
    "reducer_messages",
    "reflection_json_line",
    "reflector_messages",
]
