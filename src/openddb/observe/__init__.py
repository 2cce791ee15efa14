"""What each request consumed, and who is told: the request record (`record.py`), the metrics (`metrics.py`), the
throttle (`throttle.py`). See docs/ARCHITECTURE.md, "Observation"."""
