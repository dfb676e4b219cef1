"""The MCP server: one orchestrator's memory as tools for a model, over stdio or HTTP."""
