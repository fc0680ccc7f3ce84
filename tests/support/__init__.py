"""Shared test harness: real server processes, SSE parsing, demo knobs."""
