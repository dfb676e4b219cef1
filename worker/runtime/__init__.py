"""The Celery runtime: the app, the broker, shard routing, the batching worker, beat and
metrics.
"""
