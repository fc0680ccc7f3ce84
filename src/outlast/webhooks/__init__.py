"""Webhooks on the wire (G12): Standard Webhooks signatures and one bounded HTTP attempt.

This package knows nothing of runs or stores: the engine's delivery loop
(``outlast.engine.webhooks``) decides what is owed and when, and calls it.
"""
