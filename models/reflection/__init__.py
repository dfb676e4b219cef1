"""Reflection: topics, insights, evolves proposals and their review, crystals."""
