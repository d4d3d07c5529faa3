"""The running service: the app, the slow-axis scheduler, the Prometheus exporter, the HTTP API."""
