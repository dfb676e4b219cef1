"""The write path: proposed memories from a request, extraction, secrets, reconciling with what
is known.
"""
