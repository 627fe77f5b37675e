"""Concrete backends; each implements the `Backend` protocol (`trioqueue._backend`)."""
