"""Runnable agents, one per framework outlast hosts: ``outlast serve --agent
assistant=examples.<name>:agent`` from the repository root (docs/agents.md)."""
