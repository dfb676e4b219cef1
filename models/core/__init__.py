"""The memory model every feature shares: nodes, edges, provenance, their rules and the task
payloads.
"""
