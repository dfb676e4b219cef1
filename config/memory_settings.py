"""Settings of one orchestrator's memory: the ``memory.*`` sections (retrieval, ingest,
scope, write-back, bulletin, context, the execution log, reflection, evolves,
governance), each a model that forbids unknown keys. :mod:`.settings` puts them
together with the process-wide sections.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from orchmem.config.governance import GovernanceSettings

#: A memory tier (models/core/governance_fields.py).
TierName = Literal["profile", "semantic", "episodic", "procedural"]


class Section(BaseModel):
    """A settings section: unknown keys are errors, assignments are validated."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True)


class RetrievalSettings(Section):
    """Hybrid recall: candidate list sizes, RRF constant and ranking modifiers."""

    top_n: int = Field(20, ge=1, le=500)
    #: Terms of open conflict/evolves insights matching a question that recall adds to
    #: it (models/recall/expansion.py); 0: none.
    insight_terms: int = Field(6, ge=0, le=50)
    top_k_vector: int = Field(50, ge=1, le=5000)
    #: From this many vectors on, recall's vector stage searches the approximate index
    #: file beside memory.db (models/storage/search/ann.py; docs/operations/scale.md)
    #: instead of every vector; below it, search is exact. 0: always exact.
    ann_threshold: int = Field(50_000, ge=0, le=1_000_000_000)
    top_k_text: int = Field(50, ge=1, le=5000)
    #: RRF constant. The usual 60 (chosen for TREC runs of 1,000-document lists) lets a
    #: middling consensus of two 50-item lists outrank each list's best hit; 10 keeps
    #: consensus but lets a strong top hit through. Measured on LoCoMo:
    #: docs/concepts/recall.md#why-rrf_k-is-10.
    rrf_k: int = Field(10, ge=1, le=10_000)
    #: Weight of the importance boost: factor 1 + w * (importance - 50) / 50.
    importance_weight: float = Field(0.2, ge=0.0, le=1.0)
    #: Weight of the recency decay: factor (1 - w) + w * 0.5 ** (age / half_life).
    recency_weight: float = Field(0.1, ge=0.0, le=1.0)
    recency_half_life_days: float = Field(90.0, gt=0.0, le=36_500.0)
    #: Weight of confidence: factor (1 - w) + w * confidence.
    confidence_weight: float = Field(0.2, ge=0.0, le=1.0)
    #: Penalty on a memory contradicted by a newer active one: factor 1 - p.
    contradiction_penalty: float = Field(0.25, ge=0.0, le=1.0)
    #: Favour for memories of the type a question asks about ("what did we decide" →
    #: Decision): their score is multiplied by 1 + this (models/language/intent.py).
    intent_weight: float = Field(0.3, ge=0.0, le=2.0)
    #: Relevance floor: a memory is returned only if its cosine similarity to the query
    #: reaches min_similarity, or min_similarity_text when full-text search found it
    #: too (measured on LoCoMo and unrelated questions:
    #: docs/concepts/recall.md#how-the-floor-was-chosen).
    #: min_similarity = 0 turns the floor off.
    min_similarity: float = Field(0.3, ge=0.0, le=1.0)
    min_similarity_text: float = Field(0.2, ge=0.0, le=1.0)
    #: How long a client's recall waits for its own unfinished write-backs.
    read_your_writes_timeout_s: float = Field(5.0, ge=0.0, le=120.0)
    #: Plan every recall by the kind of question (models/recall/router.py;
    #: docs/concepts/recall.md#the-router): the question's time window, neighbours of the
    #: first hits, the speaker it names, memories that only ask lowered. On by default
    #: because LoCoMo's held-out conversations gain with it
    #: (docs/performance.md#recall-quality-on-locomo). A recall's own ``route`` argument
    #: wins.
    router: bool = True
    #: While the query is embedded (on the calling thread), run the full-text search
    #: on a helper thread, in the same read snapshot (models/recall/overlap.py;
    #: docs/concepts/recall.md#overlap). The answer is the same either way; false does it
    #: in turn.
    overlap: bool = True
    #: A plug-in that reorders the fused candidates: "package.module:function", called
    #: as ``function(query, candidates)`` with the best ``rerank_top_k`` candidates
    #: (memoryId, type, content, score), returning memoryIds best first
    #: (models/recall/rerank.py; docs/concepts/recall.md#the-reranker). None: the fused
    #: order stands.
    reranker: str | None = Field(None, pattern=r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$")
    rerank_top_k: int = Field(30, ge=1, le=500)


class IngestSettings(Section):
    enabled: bool = True
    max_file_size_mb: float = Field(5.0, gt=0.0, le=1024.0)
    #: Upper bound on the memories one file may produce.
    max_memories_per_file: int = Field(2000, ge=1, le=100_000)
    #: Files handled by one scan task; the rest go to a follow-up scan.
    max_files_per_scan: int = Field(500, ge=1, le=100_000)
    #: A file modified more recently than this is left for the next scan (it may still
    #: be being written). Drop files by writing elsewhere and renaming into ingest/.
    min_file_age_s: float = Field(1.0, ge=0.0, le=3600.0)
    #: The extraction rules' work on one .md/.txt file, in characters read: each pattern
    #: run costs its text's length plus a fixed 8 (``models.extraction.ExtractionBudget``).
    #: A file over it is rejected (``extraction_budget``). Prose needs 55-75 per
    #: character, the costliest text 177 (a three-character sentence per line), so the
    #: default admits any file within ``max_file_size_mb = 5`` (at most 930 M); it
    #: binds when that limit is raised.
    extraction_budget_chars: int = Field(1_000_000_000, ge=1000, le=10**13)
    #: Backstop for the same budget in wall-clock seconds per file, for work the count
    #: misjudges (the slowest 5 MB file in benchmarks/extraction_scaling.py takes 14 s).
    extraction_budget_s: float = Field(120.0, gt=0.0, le=3600.0)


class ScopeSettings(Section):
    cross_orchestrator: bool = False

    @field_validator("cross_orchestrator")
    @classmethod
    def _never_cross(cls, value: bool) -> bool:
        if value:
            raise ValueError(
                "cross-orchestrator recall is not allowed in v1; set it to false or remove it"
            )
        return value


class WritebackSettings(Section):
    #: "rules" (built in), or "package.module:function" for another extractor with the
    #: same signature: (messages, kind) -> candidates.
    extractor: str = Field("rules", pattern=r"^(rules|[A-Za-z_][\w.]*:[A-Za-z_]\w*)$")
    #: Cosine similarity at or above which a candidate reinforces an existing memory
    #: of the same type instead of creating a duplicate.
    dedup_similarity: float = Field(0.95, ge=0.5, le=1.0)
    #: Cosine similarity at or above which two memories of the same type are checked
    #: for an update or a contradiction of the same subject.
    related_similarity: float = Field(0.5, ge=0.0, le=1.0)
    max_memories_per_task: int = Field(500, ge=1, le=10_000)
    max_content_chars: int = Field(8000, ge=16, le=100_000)
    #: Episodic capture: a transcript write-back also stores one summary of the exchange
    #: (the user's and the assistant's key lines, tier episodic, linked to the statements
    #: extracted from it; models/writeback/episodic.py).
    episodic_summary: bool = False
    #: The longest such summary, in characters.
    episodic_summary_chars: int = Field(400, ge=80, le=4000)


class BulletinSettings(Section):
    max_chars_per_section: int = Field(600, ge=40, le=20_000)
    max_total_chars: int = Field(2400, ge=200, le=100_000)
    max_items_per_section: int = Field(6, ge=1, le=100)
    #: Memories under this confidence are listed as uncertain.
    low_confidence: float = Field(0.5, ge=0.0, le=1.0)
    #: How long the client waits for a fresh bulletin before it falls back.
    timeout_s: float = Field(2.0, gt=0.0, le=120.0)


class ContextSettings(Section):
    """The text block ``MemoryClient.context_for`` puts in a prompt."""

    max_chars: int = Field(4000, ge=200, le=200_000)
    selector_top_n: int = Field(5, ge=0, le=100)
    step_top_n: int = Field(8, ge=0, le=100)
    diagnostics_top_n: int = Field(12, ge=0, le=100)
    # Injection by tier (docs/concepts/recall.md#injection-by-tier):
    #: Tiers whose active memories are always in the block, first (newest first, at
    #: most ``always_max``), whatever the query: how to work.
    always_tiers: list[TierName] = Field(["procedural"])
    always_max: int = Field(5, ge=0, le=50)
    #: Tiers recalled for the query.
    recalled_tiers: list[TierName] = Field(["profile", "semantic"], min_length=1)
    #: Tiers recalled too when the router's intent for the query is one of
    #: ``on_request_intents``, or when the caller asks (``context_for(episodic=True)``).
    on_request_tiers: list[TierName] = Field(["episodic"])
    on_request_intents: list[Literal["similar_case", "entity_time", "what_happened",
                                     "profile", "semantic"]] = Field(
        ["what_happened", "similar_case"])
    #: New memories since working.md was written after which an injection rebuilds it
    #: first (an accepted proposal or a forget makes it stale at once).
    working_refresh_after: int = Field(20, ge=1, le=1_000_000)
    #: How long an injection waits for that rebuild before using the last working.md.
    working_refresh_timeout_s: float = Field(2.0, ge=0.0, le=60.0)
    #: "always" recalls for every block; "fallback" skips recall when the caller says
    #: its context is under pressure (``context_for(pressure=...)``), keeping the rest.
    recall_mode: Literal["always", "fallback"] = "always"
    #: The share of the caller's context in use from which "fallback" skips recall.
    pressure_threshold: float = Field(0.85, ge=0.0, le=1.0)


class ExecLogSettings(Section):
    """``memory.log.*``: the execution log (models/execlog/rules.py)."""

    #: Longest prompt, response or note text stored beside its digest; longer is refused.
    max_text_chars: int = Field(4000, ge=0, le=100_000)
    #: Longest JSON ``data`` of one event (tool arguments, outcome details).
    max_data_chars: int = Field(16_000, ge=2, le=1_000_000)
    #: Checkpoint state schemas this orchestrator can restore; another is refused.
    checkpoint_schema_versions: list[int] = Field(default_factory=lambda: [1], min_length=1)
    #: Recall warns when a projection (episodes, vectors) lags the log by more events.
    max_projection_lag: int = Field(1000, ge=0, le=10**9)
    #: A *what happened* recall (or one naming a run) returns the log events that answer
    #: it in ``bundle.log`` (models/recall/log_answer.py;
    #: docs/concepts/recall.md#what-happened-reads-the-log): at most this many events a
    #: page, of at most ``answer_max_runs`` runs. 0 events: the log is not read.
    answer_max_events: int = Field(50, ge=0, le=1000)
    answer_max_runs: int = Field(5, ge=1, le=100)
    #: Events recorded more days ago are archived to JSONL by the daily retention job
    #: (models/execlog/archive.py); None: the log is never archived.
    archive_after_days: int | None = Field(None, ge=1, le=36_500)
    #: The explicit policy that lets the archive take audit-critical events too (tool
    #: calls, checkpoints, replay and compensation records); off, they stay in the log.
    archive_audit_critical: bool = False
class ReflectSettings(Section):
    """Reflection (models/reflection/stages.py): topics, crystals and the working-memory
    projection."""

    #: Cosine at which a memory without a subject joins a topic's first memory.
    topic_similarity: float = Field(0.55, ge=0.0, le=1.0)
    #: Units a topic needs before it is compiled into a crystal.
    crystal_min_units: int = Field(3, ge=2, le=1000)
    #: Units quoted in a crystal's extractive summary.
    crystal_summary_units: int = Field(3, ge=1, le=20)
    #: "extractive", or a "package.module:function" ``(topic, contents) -> text``.
    summariser: str = Field("extractive", pattern=r"^(extractive|[A-Za-z_][\w.]*:[A-Za-z_]\w*)$")
    #: Size bound of memory/bulletins/working.md.
    working_max_chars: int = Field(2400, ge=200, le=100_000)


class EvolvesSettings(Section):
    """Evolves proposals (models/reflection/evolves.py): shadow (review only) or auto."""

    mode: Literal["shadow", "auto"] = "shadow"
    #: In auto mode, a proposal is applied without review only at this confidence or above.
    auto_threshold: float = Field(0.9, ge=0.5, le=1.0)


class MemorySettings(Section):
    """The ``memory.*`` keys, global or per orchestrator
    (docs/guide/configuration.md#settings-and-their-defaults)."""

    enabled: bool = True
    bulletin_mode: Literal["every_message"] = "every_message"
    retrieval: RetrievalSettings = Field(default_factory=RetrievalSettings)
    ingest: IngestSettings = Field(default_factory=IngestSettings)
    scope: ScopeSettings = Field(default_factory=ScopeSettings)
    writeback: WritebackSettings = Field(default_factory=WritebackSettings)
    bulletin: BulletinSettings = Field(default_factory=BulletinSettings)
    context: ContextSettings = Field(default_factory=ContextSettings)
    log: ExecLogSettings = Field(default_factory=ExecLogSettings)
    reflect: ReflectSettings = Field(default_factory=ReflectSettings)
    evolves: EvolvesSettings = Field(default_factory=EvolvesSettings)
    governance: GovernanceSettings = Field(default_factory=GovernanceSettings)
