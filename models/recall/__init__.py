"""Recall, the synchronous read path: router, hybrid search, fusion, time, the bundle and the
prompt block.
"""
