"""What a run spends: GPU-seconds, dollars, and what an accepted improvement cost.

- :mod:`.cost`: GPU-seconds of each step.
- :mod:`.dollars`: each endpoint's price, and the dollars of each step, role and accepted improvement.
- :mod:`.improvements`: candidates explored and accepted, tokens per accepted improvement.
"""
