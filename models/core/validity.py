"""When a memory was true and when we knew it: the two time tests recall applies.

Valid time: a memory is *valid at T* when it had started (``validFrom``, else
``createdAt``: a memory written before schema 4, or given no validFrom, is true since
it was said) and had not stopped (``validTo`` open or after T). ``recall(as_of=T)``
asks "what was true at T", whenever we were told: a conversation imported today with
its 2023 dates answers for May 2023. Active and superseded memories count (a
superseded memory was true until its successor came); a memory superseded before
schema 4 has no validTo: its supersede time (``updatedAt``) stands in.

Transaction time: a memory was *known at K* when it was stored by then (``createdAt``).
``recall(known_at=K)`` asks "what had we been told by K": what was stored by K and not
yet replaced then (a memory superseded after K, by ``updatedAt``, still counts). Given
both, a memory must pass both tests. Retracted memories stay out of either: a
retraction says the memory was never right.

Timestamps compare as text: every stored one is ``format_ts`` (UTC, fixed width).
"""

from __future__ import annotations

from datetime import datetime, timedelta

from orchmem.config import MemoryValidationError
from orchmem.models.core.shapes import Status, format_ts

#: Clock skew tolerated between the caller and this process before an as-of is "future".
FUTURE_SLACK = timedelta(seconds=5)


def check_as_of(as_of: datetime | str | None, now: datetime,
                name: str = "as_of") -> str | None:
    """``as_of`` as a stored-format timestamp, or None; MemoryValidationError naming
    ``name`` (``as_of``, ``known_at``) when it has no time zone, does not parse, or lies
    in the future."""
    if as_of is None:
        return None
    if isinstance(as_of, str):
        text = as_of
        try:
            as_of = datetime.fromisoformat(text.replace("Z", "+00:00"))
        except ValueError:
            raise _bad(name, f"{text[:40]!r} is not an ISO 8601 timestamp") from None
    if not isinstance(as_of, datetime):
        raise _bad(name, f"expected a timestamp, got {type(as_of).__name__}")
    if as_of.tzinfo is None:
        raise _bad(name, "must carry a time zone (e.g. 2024-05-01T10:00:00Z)")
    try:
        stored = format_ts(as_of)
    except ValueError as exc:
        raise _bad(name, str(exc)) from None
    if as_of > now + FUTURE_SLACK:
        raise _bad(name, f"{as_of.isoformat()} is in the future (now {now.isoformat()}): "
                   "what will be true is not known")
    return stored


def _bad(name: str, message: str) -> MemoryValidationError:
    return MemoryValidationError(f"{name}: {message}", [{"path": name, "message": message}])


def valid_at(at: str | None, *, status: str, created_at: str, updated_at: str,
             valid_from: str | None, valid_to: str | None, known: str | None = None) -> bool:
    """True when the memory was valid at ``at`` (valid time) and known at ``known``
    (transaction time); a time that is None is not asked (see the module's text)."""
    if status == Status.RETRACTED.value:
        return False
    superseded = status == Status.SUPERSEDED.value
    if known is not None:
        if created_at > known:
            return False
        if at is None and superseded and updated_at <= known:
            return False  # replaced by then: not what we believed at K
    if at is None:
        return True
    if (valid_from or created_at) > at:
        return False
    end = valid_to if valid_to is not None else (updated_at if superseded else None)
    return end is None or at < end


def effective_start(valid_from: str | None, created_at: str) -> str:
    return valid_from or created_at
