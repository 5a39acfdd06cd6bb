"""Kafka 0.8 runbooks run line by line (a package, so its conftest does not shadow tests/integration/conftest.py)."""
