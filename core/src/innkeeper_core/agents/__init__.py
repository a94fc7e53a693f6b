"""Agents: one per live session; inbox, turns, system assembly, requests and retries."""
