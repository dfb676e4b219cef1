"""The web console: one orchestrator's memory in a browser, served under ``/console`` by
the HTTP API (``orchmem serve``); see docs/guide/console.md.

Pages are rendered on the server (:mod:`.markup` escapes every value), the only assets
are the stylesheet and a small script in ``static/``, shipped in the package.
"""
