"""The outside world on top of the Python API: HTTP delivery, MQTT, followed files (sources and sinks)."""
