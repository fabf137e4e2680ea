"""MCP tool servers as environments, through the official ``mcp`` SDK client (the ``tau2`` extra).

- :mod:`.transport`: a bounded stdio transport, the server in a process group of its own, always stopped.
- :mod:`.client`: :class:`~.client.McpConnection`, one server connection owned by one task.
- :mod:`.environment`: :class:`~.environment.McpEnvironment`, one server per episode; ``--env mcp:COMMAND``.

This index imports nothing of the SDK: what decides whether a run uses MCP (:data:`ENV_PREFIX`)
is read here by runs without the ``tau2`` extra.
"""

ENV_PREFIX = "mcp:"
"""``--env mcp:COMMAND``: the MCP stdio server ``COMMAND`` (shell words) per episode."""
