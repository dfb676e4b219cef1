"""Reflection's rows: units, topics, crystals, insights and proposals."""
