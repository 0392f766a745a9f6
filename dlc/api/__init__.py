"""The scheduler's HTTP API: server, CLI client, sandbox logs, Prometheus metrics."""
