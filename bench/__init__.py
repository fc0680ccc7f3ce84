"""Benchmarks of outlast's hot paths, each against a baseline measured in the same run.

Run them all with ``python bench/run_all.py`` (``--quick`` for a short smoke run),
or one at a time with ``python -m bench.<name>``; results go to docs/performance.md.
"""
