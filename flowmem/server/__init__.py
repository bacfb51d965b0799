"""Servers for agents outside this process: the HTTP API (`flowmem api`) and the MCP server
(`flowmem mcp`). Both are thin shells around `flowmem.server.service.Service`."""
