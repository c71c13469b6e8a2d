"""Observability: traces, metrics, the tool-call audit trail and load shedding."""
