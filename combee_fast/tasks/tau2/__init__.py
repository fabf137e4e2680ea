"""tau2-bench's retail and airline domains as tasks (the ``tau2`` extra).

- :mod:`.domain`: a domain's wheel: its data (pinned), its MCP server, its tools in-process.
- :mod:`.scoring`: tau2's scoring: the final database against the gold replay, the required information.
- :mod:`.environment`: the domain's MCP server per episode, the customer, the checker.
- :mod:`.user`: the customer as the model role ``user``.
- :mod:`.task`: ``--task tau2-retail`` and ``--task tau2-airline``.
"""
