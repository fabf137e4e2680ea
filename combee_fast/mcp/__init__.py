"""MCP tool servers as environments, through the official ``mcp`` SDK client (the ``tau2`` extra).

    transport    a bounded stdio transport: the server in its own process group, always stopped
    client       one server connection owned by one task (:class:`McpConnection`)
    environment  :class:`McpEnvironment`: one server per episode; ``--env mcp:COMMAND``
"""
