"""Innkeeper public plugin API."""
