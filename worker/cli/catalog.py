"""The catalogue of ``orchmem`` commands: where each is defined and its one-line summary.

The group loads a command's module only when that command runs (or its own ``--help``
is asked for), so ``orchmem --help`` and ``--version`` start without celery, numpy or
torch. The summaries are what ``orchmem --help`` lists; tests/unit/cli/test_cli_help.py
checks that each equals its command's own short help.
"""

from __future__ import annotations

#: ``{name: (module under orchmem.worker.cli, attribute, summary)}``
COMMANDS: dict[str, tuple[str, str, str]] = {
    "backup": ("durability", "backup",
               "Back up an orchestrator's memory into memory/backups/ (SQLite's online backup "
               'API: safe while workers write), keeping backup.retention_count of them.'),
    "beat": ("ops", "beat",
               'Run the beat scheduler (re-embedding, ingest scans, integrity checks, gc, '
               'bulletin refresh), at the intervals of the [beat] settings.'),
    "broker": ("ops", "broker", 'Run only the embedded Redis broker (AOF on) in the foreground.'),
    "bulletin": ("memory", "bulletin",
               "Build and show the orchestrator's bulletin (what is sent with every message)."),
    "check": ("ops", "check", "Validate the settings, open every orchestrator's database, "
              "and look for files and folders under the root that other users could read."),
    "checkpoint": ("logcmd", "checkpoint",
               'Checkpoints of the execution log: show one as restore sees it, diff two.'),
    "deadletter": ("ops", "deadletter",
               'Tasks that crashed their worker max_deliveries times: list and retry them.'),
    "demo": ("ops", "demo", 'Run a scripted session of two orchestrators and print a trace.'),
    "drain-queues": ("ops", "drain_queues",
               "Move the messages of shards above `shards` to shard 0's control queue."),
    "export": ("portability", "export",
               "Write one orchestrator's memory to files, from one read-only snapshot."),
    "flower": ("ops", "flower", 'Run Flower (task monitoring) against the same broker.'),
    "forget": ("governance", "forget",
               'Forget memories by id and/or policy (every selector given must match).'),
    "history": ("edits", "history",
               "Show a memory's audit events, edges and sources, as a read with --session / "
               "--project sees them (another session's memory, or a restricted one without "
               '--include-restricted, is not found).'),
    "import": ("portability", "import_",
               'Import an export FOLDER into an orchestrator (new, or merging), all or nothing.'),
    "ingest": ("memory", "ingest",
               "Scan the orchestrator's memory/ingest/ folder now (.txt, .md, .json files)."),
    "invalidate": ("governance", "invalidate",
               'Mark MEMORY_ID wrong (retracted, audited as invalidate).'),
    "link": ("edits", "link", 'Add a typed edge FROM_ID -> TO_ID.'),
    "list": ("memory", "list_",
               'List memories, newest first (reads the database directly; restricted ones left '
               'out; global ones and those of --session / --project).'),
    "log": ("logcmd", "log",
               'Replay the execution log of an orchestrator in the order it was appended.'),
    "mcp": ("serve", "mcp",
               "Serve ID's memory to an MCP client (stdio, or --http): tools remember, recall, "
               'bulletin, forget, supersede and the resource memory://bulletin.'),
    "migrate": ("durability", "migrate",
               "Bring memory files up to this release's schema (backup first, one transaction, "
               'checked).'),
    "patch": ("governance", "patch",
               'Change fields of MEMORY_ID in place (a content change is `supersede`).'),
    "reader": ("reader", "reader",
               'Answer recalls sent by remote clients (MemoryClient(..., remote=True)) for the '
               'given shards, with read-only connections: run it on the host that owns their '
               'files.'),
    "rebuild": ("durability", "rebuild",
               'Drop derived data and rebuild it from the records (all parts when none is '
               'named), or rebuild lost memories from the execution log (--from-log).'),
    "recall": ("memory", "recall",
               'Recall the memories most relevant to QUERY (hybrid: vectors + full text, fused '
               'by RRF).'),
    "reembed": ("ops", "reembed",
               'Re-embed memories whose vector is missing or from another model, in the '
               'background.'),
    "recover": ("governance", "recover",
               'Make a soft-forgotten (retracted) MEMORY_ID active again; a hard-forgotten one '
               'is erased and cannot come back (error code erased).'),
    "reflect": ("reflection", "reflect",
               'Reflect now (through the queue): topics, insights, proposals, crystals, '
               'working.md.'),
    "restore": ("durability", "restore",
               "Replace an orchestrator's memory with BACKUP (a path, or a file name in "
               'memory/backups/).'),
    "retention": ("governance", "retention",
               'Apply the retention rules (memory.governance.retention) now, as beat does daily.'),
    "retract": ("edits", "retract",
               'Withdraw MEMORY_ID (status retracted; content kept, hidden from recall).'),
    "review": ("reflection", "review", 'Review evolves proposals: list, accept, reject.'),
    "serve": ("serve", "serve",
               'Serve the HTTP API (OpenAPI at /openapi.json) and the web console (/console): '
               'each request needs a token of the orchestrator it names (`orchmem token '
               'create`).'),
    "stats": ("memory", "stats",
               'Counts per type and status, embeddings missing, dead letters, queue depths, last'
               ' bulletin and last ingest.'),
    "supersede": ("edits", "supersede",
               'Mark MEMORY_ID superseded by another memory (--by) or by new --content.'),
    "token": ("tokens", "token",
               'API tokens: each bound to one orchestrator; only their SHA-256 is stored '
               '(<root>/api/tokens.json, mode 0600).'),
    "topics": ("reflection", "topics",
               'List the topics of active memories with their counts (and crystals).'),
    "up": ("ops", "up",
               'Run the broker (when embedded), one worker per shard and beat, in the '
               'foreground.'),
    "worker": ("ops", "worker", 'Run one Celery worker (concurrency 1) for the given shards.'),
    "write": ("memory", "write", 'Write one memory through the queue and print its memoryId.'),
}
