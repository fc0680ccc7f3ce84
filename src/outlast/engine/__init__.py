"""The run engine: admission, execution, the event log's write path, live fan-out."""
