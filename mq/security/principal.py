"""The principal of a client certificate: its subject's distinguished name mapped by ``ssl.principal.mapping.rules``.

The name is the subject in RFC 2253 form, most specific first and without spaces (``CN=alice,OU=eng,O=example``), as
Kafka's X500Principal.getName() writes it. Rules, comma-separated and tried in order, are ``DEFAULT`` (the name
itself) or ``RULE:<pattern>/<replacement>/[L|U]``: when the Java-style regular expression ``pattern`` matches the
whole name, the result is ``replacement`` with ``$1``... filled in, lower- or upper-cased by ``L``/``U``. A name no
rule maps has no principal (the connection is refused).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from cryptography import x509

_RULE = re.compile(
    r"\s*(?:(?P<default>DEFAULT)|RULE:(?P<pattern>(?:[^/\\]|\\.)*)/(?P<replacement>(?:[^/\\]|\\.)*)/(?P<case>[LU])?)\s*(?:,|$)"
)
_GROUP = re.compile(r"\$(\d+)")


class PrincipalMappingError(ValueError):
    """``ssl.principal.mapping.rules`` is malformed."""


@dataclass(frozen=True)
class _Rule:
    pattern: re.Pattern[str] | None  # None: DEFAULT
    replacement: str = ""
    case: str | None = None

    def apply(self, name: str) -> str | None:
        if self.pattern is None:
            return name
        match = self.pattern.fullmatch(name)
        if match is None:
            return None
        groups = match.groups()
        result = _GROUP.sub(lambda m: _group(groups, int(m.group(1))), self.replacement)
        if self.case == "L":
            return result.lower()
        return result.upper() if self.case == "U" else result


def _group(groups: tuple[str | None, ...], index: int) -> str:
    if index == 0 or index > len(groups):
        return ""
    return groups[index - 1] or ""


class PrincipalMapper:
    """``ssl.principal.mapping.rules``, parsed once."""

    def __init__(self, rules: str) -> None:
        self.rules: list[_Rule] = []
        text, at = rules.strip(), 0
        while at < len(text):
            match = _RULE.match(text, at)
            if match is None or match.end() == at:
                raise PrincipalMappingError(f"invalid rule in ssl.principal.mapping.rules at '{text[at:]}'")
            at = match.end()
            if match.group("default"):
                self.rules.append(_Rule(None))
                continue
            try:
                pattern = re.compile(match.group("pattern").replace("\\/", "/"))
            except re.error as exc:
                raise PrincipalMappingError(f"invalid pattern in ssl.principal.mapping.rules: {exc}") from None
            self.rules.append(_Rule(pattern, match.group("replacement").replace("\\/", "/"), match.group("case")))
        if not self.rules:
            self.rules.append(_Rule(None))

    def name_of(self, distinguished_name: str) -> str | None:
        """The short name of ``distinguished_name`` by the first rule that maps it; None when none does."""
        for rule in self.rules:
            mapped = rule.apply(distinguished_name)
            if mapped is not None:
                return mapped
        return None

    def principal_of_certificate(self, der: bytes) -> str | None:
        """``User:<name>`` of a DER certificate's subject, or None when no rule maps it."""
        name = self.name_of(subject_name(der))
        return None if name is None else f"User:{name}"


def subject_name(der: bytes) -> str:
    """The subject of a DER certificate in RFC 2253 form, most specific attribute first."""
    return x509.load_der_x509_certificate(der).subject.rfc4514_string()
