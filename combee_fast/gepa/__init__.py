"""GEPA as a learner on the engine: evolutionary search over named text components (a system
prompt), with a Pareto pool of candidates over the validation instances.

- :mod:`.candidate`: the artifact, named text components;
- :mod:`.pareto`: the Pareto candidate pool (dominance, parent sampling by front membership);
- :mod:`.calls`: the three role calls (solve = one metric call, propose = reflection, aggregate);
- :mod:`.learner`: the proposer/merger half that Combee's reduce tree calls;
- :mod:`.reflection`: how a child's text is proposed: serial (one call) or Combee (shuffled
  groups, all in flight, then the aggregation tree);
- :mod:`.search`: the GEPA loop with its metric-call budget; :data:`.search.GEPA_METHODS` names
  the methods ``gepa`` and ``combee-gepa``.

Prompts are in ``gepa/prompts/``, one file per role and message.
"""
