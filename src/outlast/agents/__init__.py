"""Agents: the interface and the shipped agents."""
