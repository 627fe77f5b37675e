"""Concrete backends; each implements `trioqueue.abc.Backend`."""
