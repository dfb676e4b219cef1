"""When a memory was true and when we knew it: the as-of test recall applies.

A memory is *valid at T* when it had started (``validFrom``, else ``createdAt``: a
memory written before schema 4, or given no validFrom, is true since it was said) and
had not stopped (``validTo`` open or after T). It was *known at T* when it was stored
by then (``createdAt``). ``recall(as_of=T)`` returns only memories both valid and known
at T, active or since superseded (a superseded memory was what we believed until its
successor came). A memory superseded before schema 4 has no validTo: its supersede
time (``updatedAt``) stands in. Retracted memories stay out: a retraction says the
memory was never right.

Timestamps compare as text: every stored one is ``format_ts`` (UTC, fixed width).
"""

from __future__ import annotations

from datetime import datetime, timedelta

from orchmem.config import MemoryValidationError

from .schema import Status, format_ts

#: Clock skew tolerated between the caller and this process before an as-of is "future".
FUTURE_SLACK = timedelta(seconds=5)


def check_as_of(as_of: datetime | str | None, now: datetime) -> str | None:
    """``as_of`` as a stored-format timestamp, or None; MemoryValidationError naming
    ``as_of`` when it has no time zone, does not parse, or lies in the future."""
    if as_of is None:
        return None
    if isinstance(as_of, str):
        text = as_of
        try:
            as_of = datetime.fromisoformat(text.replace("Z", "+00:00"))
        except ValueError:
            raise _bad(f"{text[:40]!r} is not an ISO 8601 timestamp") from None
    if not isinstance(as_of, datetime):
        raise _bad(f"expected a timestamp, got {type(as_of).__name__}")
    if as_of.tzinfo is None:
        raise _bad("must carry a time zone (e.g. 2024-05-01T10:00:00Z)")
    try:
        stored = format_ts(as_of)
    except ValueError as exc:
        raise _bad(str(exc)) from None
    if as_of > now + FUTURE_SLACK:
        raise _bad(f"{as_of.isoformat()} is in the future (now {now.isoformat()}): "
                   "what will be true is not known")
    return stored


def _bad(message: str) -> MemoryValidationError:
    return MemoryValidationError(f"as_of: {message}", [{"path": "as_of", "message": message}])


def valid_at(at: str, *, status: str, created_at: str, updated_at: str,
             valid_from: str | None, valid_to: str | None) -> bool:
    """True when the memory was known and valid at ``at`` (see the module's text)."""
    if status == Status.RETRACTED.value or created_at > at:
        return False
    if (valid_from or created_at) > at:
        return False
    end = valid_to if valid_to is not None else (
        updated_at if status == Status.SUPERSEDED.value else None)
    return end is None or at < end


def effective_start(valid_from: str | None, created_at: str) -> str:
    return valid_from or created_at
