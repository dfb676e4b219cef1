"""Query text: user text cut into the terms full-text search may see, never FTS syntax.

A query is cut into word tokens the way FTS5's unicode61 tokenizer cuts text (runs of
letters and digits), and every token is sent as a double-quoted string joined by
``OR``. Quotes, ``NEAR``, ``*``, ``^``, ``column:`` filters, ``AND/OR/NOT`` and
parentheses in the user's text are therefore either separators or plain words: no
input can raise a syntax error or change what the query means. Common English
function words are dropped when other words remain (they cost time on large tables
and carry little BM25 weight); at most ``MAX_TERMS`` distinct terms are kept.
"""

from __future__ import annotations

import re
import unicodedata

#: Characters of a query that are looked at; the rest is ignored.
MAX_QUERY_CHARS = 20_000
MAX_TERMS = 48
MAX_TERM_CHARS = 64
_TOKEN = re.compile(r"[^\W_]+", re.UNICODE)

STOPWORDS = frozenset((
    "a", "an", "and", "are", "as", "at", "be", "been", "but", "by", "can", "could", "did",
    "do", "does", "for", "from", "had", "has", "have", "he", "her", "hers", "him", "his",
    "how", "i", "if", "in", "into", "is", "it", "its", "me", "my", "of", "on", "or", "our",
    "she", "so", "than", "that", "the", "their", "them", "then", "there", "these", "they",
    "this", "those", "to", "was", "we", "were", "what", "when", "where", "which", "who",
    "whom", "why", "will", "with", "would", "you", "your", "yours", "about", "after", "all",
    "also", "am", "any", "because", "before", "being", "both", "during", "each", "few",
    "further", "here", "just", "more", "most", "no", "nor", "not", "now", "off", "once",
    "only", "other", "out", "over", "own", "same", "should", "some", "such", "through",
    "too", "under", "until", "up", "very", "while", "yourself",
))


def clean_text(text: str) -> str:
    """``text`` as valid NFC UTF-8 (like stored content; lone surrogates replaced), at most
    MAX_QUERY_CHARS long."""
    valid = text[:MAX_QUERY_CHARS].encode("utf-8", "replace").decode("utf-8")
    return unicodedata.normalize("NFC", valid)


def query_terms(text: str) -> list[str]:
    """Distinct word tokens of ``text``, function words dropped when others remain.

    Tokens keep their case and accents: FTS5 folds both with the same tokenizer it used
    for the stored text (Python's ``casefold`` would not agree with it, e.g. on "ŉ").
    """
    seen: dict[str, str] = {}
    for token in _TOKEN.findall(clean_text(text)):
        term = token[:MAX_TERM_CHARS]
        seen.setdefault(term.lower(), term)
    content = [term for key, term in seen.items() if key not in STOPWORDS]
    return (content or list(seen.values()))[:MAX_TERMS]
