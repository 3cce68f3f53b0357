"""Pydantic models of the example topics."""
