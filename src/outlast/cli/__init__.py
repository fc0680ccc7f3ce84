"""The ``outlast`` command line: serve, inspect, control."""
