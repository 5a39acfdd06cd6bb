"""Kafka's JAAS configuration text (``sasl.jaas.config``, ``listener.name.<l>.<mechanism>.sasl.jaas.config``).

``<LoginModule class> <flag> [<key>=<value> ...];`` repeated, where flag is required, requisite, sufficient or
optional and a value is a double-quoted string (``\\"`` and ``\\\\`` escaped) or a bare token. Kafka's PLAIN server
reads ``user_<name>="<password>"`` options as its users; clients read ``username`` and ``password``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

FLAGS = frozenset({"required", "requisite", "sufficient", "optional"})
PLAIN_LOGIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
SCRAM_LOGIN_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"

_TOKEN = re.compile(r'\s*(?:(?P<quoted>"(?:[^"\\]|\\.)*")|(?P<punct>[=;])|(?P<word>[^\s=;"]+))', re.DOTALL)


class JaasConfigError(ValueError):
    """The text is not a JAAS configuration (the message names what is wrong, never a value)."""


@dataclass(frozen=True)
class LoginModule:
    """One entry: its class, control flag and options in order."""

    class_name: str
    flag: str
    options: dict[str, str] = field(default_factory=dict)

    def users(self) -> dict[str, str]:
        """The ``user_<name>="<password>"`` options of a PLAIN server: name -> password."""
        return {key[5:]: value for key, value in self.options.items() if key.startswith("user_") and len(key) > 5}


def _tokens(text: str) -> list[tuple[str, str]]:
    tokens: list[tuple[str, str]] = []
    at = 0
    end = len(text.rstrip())
    while at < end:
        match = _TOKEN.match(text, at)
        if match is None:
            raise JaasConfigError(f"unexpected character at position {at}")
        kind = match.lastgroup
        assert kind is not None
        value = match.group(kind)
        if kind == "quoted":
            value = re.sub(r"\\(.)", r"\1", value[1:-1], flags=re.DOTALL)
        tokens.append((kind, value))
        at = match.end()
    return tokens


def parse_jaas_config(text: str) -> list[LoginModule]:
    """The login modules of ``text``; JaasConfigError when it is malformed or empty."""
    tokens = _tokens(text)
    modules: list[LoginModule] = []
    at = 0
    while at < len(tokens):
        if at + 1 >= len(tokens) or tokens[at][0] != "word" or tokens[at + 1][0] != "word":
            raise JaasConfigError("expected '<LoginModule class> <flag>'")
        class_name, flag = tokens[at][1], tokens[at + 1][1]
        if flag not in FLAGS:
            raise JaasConfigError(f"login module {class_name}: flag must be one of {', '.join(sorted(FLAGS))}")
        at += 2
        options: dict[str, str] = {}
        while at < len(tokens) and tokens[at] != ("punct", ";"):
            if at + 2 >= len(tokens) or tokens[at][0] != "word" or tokens[at + 1] != ("punct", "="):
                raise JaasConfigError(f"login module {class_name}: expected key=value")
            kind, value = tokens[at + 2]
            if kind == "punct":
                raise JaasConfigError(f"login module {class_name}: option {tokens[at][1]} has no value")
            options[tokens[at][1]] = value
            at += 3
        if at >= len(tokens):
            raise JaasConfigError(f"login module {class_name}: missing ';' at the end")
        at += 1
        modules.append(LoginModule(class_name, flag, options))
    if not modules:
        raise JaasConfigError("no login module")
    return modules


def login_module(text: str) -> LoginModule:
    """The one login module of a ``sasl.jaas.config`` value (Kafka allows exactly one there)."""
    modules = parse_jaas_config(text)
    if len(modules) != 1:
        raise JaasConfigError(f"sasl.jaas.config must name one login module, not {len(modules)}")
    return modules[0]
