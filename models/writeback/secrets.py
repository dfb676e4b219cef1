"""The rules-first secret detector: a memory whose text holds an obvious secret is
stored restricted.

Each rule is a regular expression, and for some a check of what it matched: a payment
card number must pass the Luhn check; a password must be stated as one ("my password
is hunter2", "password: ..."), not talked about ("the password is wrong"); a
``key = value`` credential must look random (letters and digits mixed). The rules in use
are ``memory.governance.secret_rules`` (config/governance.py). Precision and recall on
the labelled set ``tests/data/secrets/labelled.jsonl`` are measured by
``benchmarks/secret_detector.py``; the figures are in
docs/concepts/governance.md#the-secret-detector.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from orchmem.config.governance import SECRET_RULES, GovernanceSettings
from orchmem.models.core.governance_fields import Sensitivity
from orchmem.models.core.shapes import MemoryInput


def luhn_ok(digits: str) -> bool:
    """True when ``digits`` (13-19 digits) passes the Luhn checksum."""
    if not 13 <= len(digits) <= 19 or not digits.isdigit():
        return False
    total = 0
    for position, char in enumerate(reversed(digits)):
        value = int(char)
        if position % 2:
            value = value * 2 - 9 if value > 4 else value * 2
        total += value
    return total % 10 == 0


#: Issuer prefixes of payment cards: Visa, Mastercard, Amex, Diners, Discover, JCB, UnionPay.
_ISSUER = re.compile(r"^(?:4|5[1-5]|2[2-7]|3[47]|3[068]|6|35)")


def _card(match: re.Match[str]) -> bool:
    digits = re.sub(r"[ -]", "", match.group(0))
    return _ISSUER.match(digits) is not None and len(set(digits)) > 1 and luhn_ok(digits)


def _random_looking(value: str) -> bool:
    return (any(c.isdigit() for c in value) and any(c.isalpha() for c in value)
            and len(set(value)) >= 8)


def _assignment(match: re.Match[str]) -> bool:
    return _random_looking(match.group("value"))


#: Words that follow "password is" when a password is talked about, not stated.
_NOT_A_PASSWORD = frozenset("""wrong incorrect invalid required expired missing weak strong
empty blank correct right reset changed updated set needed stored saved secure insecure
too not the a an my your their our his her its same different case-sensitive long short
protected hidden encrypted hashed locked forgotten unknown""".split())


def _password(match: re.Match[str]) -> bool:
    value = match.group("value").strip("\"'\u201c\u201d\u2018\u2019.,;")
    if len(value) < 4 or value.casefold() in _NOT_A_PASSWORD:
        return False
    if match.group("sep") in (":", "="):
        return True
    # "is": the value must look like a password, not a word of the sentence
    return (match.group("quote") is not None or any(c.isdigit() for c in value)
            or any(not c.isalnum() for c in value)
            or (any(c.isupper() for c in value[1:]) and any(c.islower() for c in value)))


@dataclass(frozen=True)
class Rule:
    name: str
    pattern: re.Pattern[str]
    check: Callable[[re.Match[str]], bool] | None = None


_RULES = (
    Rule("private_key", re.compile(
        r"-----BEGIN (?:RSA |EC |DSA |OPENSSH |ENCRYPTED |PGP )?PRIVATE KEY(?: BLOCK)?-----")),
    Rule("aws_access_key", re.compile(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b")),
    Rule("github_token", re.compile(r"\b(?:gh[pousr]_[A-Za-z0-9]{36,}|github_pat_\w{22,})")),
    Rule("slack_token", re.compile(r"\bxox[abprs]-[A-Za-z0-9-]{10,}")),
    Rule("api_key_prefixed", re.compile(r"\bsk-(?:proj-|ant-[a-z0-9]+-)?[A-Za-z0-9_-]{20,}")),
    Rule("stripe_key", re.compile(r"\b[rsp]k_(?:live|test)_[A-Za-z0-9]{16,}")),
    Rule("google_api_key", re.compile(r"\bAIza[0-9A-Za-z_-]{35}")),
    Rule("jwt", re.compile(r"\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}")),
    Rule("bearer_token", re.compile(r"\bBearer\s+[A-Za-z0-9._~+/-]{20,}=*")),
    Rule("credential_assignment", re.compile(
        r"(?i)\b(?:api[_ -]?key|api[_ -]?token|access[_ -]?token|auth[_ -]?token|secret"
        r"(?:[_ -]?key)?|client[_ -]?secret|access[_ -]?key|private[_ -]?key|token)"
        r"\s*(?:is|[:=])\s*[\"'`]?(?P<value>[A-Za-z0-9_\-./+=]{16,})"), _assignment),
    Rule("password_stated", re.compile(
        r"(?i)\b(?:password|passphrase|passwd|pwd|passcode)(?:\s+(?:for|to|of|on)\s+"
        r"[\w.@-]+(?:\s[\w.@-]+){0,2})?\s*(?P<sep>is|was|:|=)\s*(?P<quote>[\"'\u201c\u2018`])?"
        r"(?P<value>[^\s\"'\u201d\u2019`]+)"), _password),
    Rule("url_credentials", re.compile(r"\b[a-z][a-z0-9+.-]*://[^\s:/@]+:[^\s:/@]{3,}@[\w.-]+")),
    Rule("payment_card", re.compile(r"(?<![\d-])\d(?:[ -]?\d){12,18}(?![\d-])"), _card),
)
RULES: dict[str, Rule] = {rule.name: rule for rule in _RULES}
assert tuple(RULES) == SECRET_RULES, "config.governance.SECRET_RULES lists every rule"


def find_secrets(text: str, rules: Iterable[str] = SECRET_RULES) -> list[str]:
    """The names of the rules that find a secret in ``text`` (empty: none found)."""
    found = []
    for name in rules:
        rule = RULES[name]
        if any(rule.check is None or rule.check(m) for m in rule.pattern.finditer(text)):
            found.append(name)
    return found


def classify(memory: MemoryInput, settings: GovernanceSettings) -> MemoryInput:
    """``memory``, restricted when the detector (if on) finds a secret in its content or
    summary. The detector only ever raises sensitivity, never lowers an explicit one."""
    if not settings.secret_detector or memory.sensitivity == Sensitivity.RESTRICTED:
        return memory
    if find_secrets(f"{memory.content}\n{memory.summary or ''}", settings.secret_rules):
        return memory.model_copy(update={"sensitivity": Sensitivity.RESTRICTED})
    return memory
