"""What each request consumed, and who is told: the request record and its listeners' protocol (`record.py`), the
metrics (`metrics.py`, served by `prometheus.py`), Contributor Insights' key counts (`insights.py`); the throttle,
which also admits requests, is api/throttle.py. See docs/ARCHITECTURE.md, "Observation"."""
