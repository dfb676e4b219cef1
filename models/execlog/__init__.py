"""The execution log: runs, steps, tool calls and checkpoints, and the episodes projected from
them.
"""
