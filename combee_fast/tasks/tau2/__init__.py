"""tau2-bench's retail and airline domains as tasks (the ``tau2`` extra).

    domain       a domain's wheel: data (pinned), its MCP server, its tools in-process
    scoring      tau2's scoring: final database against the gold replay, required information
    environment  the domain's MCP server per episode, the customer, the checker
    task         ``--task tau2-retail`` / ``--task tau2-airline``
"""
