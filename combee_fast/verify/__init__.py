"""Claims that survive.

- :mod:`.card`: the experiment card (schema and checks); :mod:`.fill`: a card with what
  ``diagnose`` measured in place of its "unknown" values.
- :mod:`.discipline`: runs made under a card; :mod:`.budget`: the card's budget as a stop rule.
- :mod:`.cells`: one (seed, hardware class) cell; :mod:`.baseline`: the cached serial baseline.
- :mod:`.verdict`: per-cell statistics and PASS/FAIL; :mod:`.verification`: ``combee verify``.
- :mod:`.diagnose`: ``combee diagnose`` (GO / NO-GO for parallelising).
- :mod:`.roles`: role separation; :mod:`.plots`, :mod:`.report`: reports with plots.
- :mod:`.cli`: the ``plan``, ``verify`` and ``diagnose`` commands.
"""
