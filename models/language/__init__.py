"""Rules that read words, with no model: what a question asks, who it names, dates in words,
full-text terms.
"""
