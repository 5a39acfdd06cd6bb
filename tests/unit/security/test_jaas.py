"""JAAS configuration text as Kafka's brokers and clients write it."""

from __future__ import annotations

import pytest

from mq.security.jaas import PLAIN_LOGIN_MODULE, JaasConfigError, login_module, parse_jaas_config


def test_a_plain_server_entry_gives_its_users_and_its_own_credentials() -> None:
    module = login_module(
        f'{PLAIN_LOGIN_MODULE} required\n  username="admin"\n  password="admin-secret"\n'
        '  user_admin="admin-secret"\n  user_alice="al\\"ice";'
    )
    assert module.class_name == PLAIN_LOGIN_MODULE and module.flag == "required"
    assert module.options["username"] == "admin" and module.options["password"] == "admin-secret"
    assert module.users() == {"admin": "admin-secret", "alice": 'al"ice'}


def test_bare_values_and_several_modules() -> None:
    modules = parse_jaas_config("a.B optional debug=true; c.D sufficient;")
    assert [(m.class_name, m.flag, m.options) for m in modules] == [
        ("a.B", "optional", {"debug": "true"}),
        ("c.D", "sufficient", {}),
    ]
    with pytest.raises(JaasConfigError, match="one login module, not 2"):
        login_module("a.B optional; c.D required;")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "no login module"),
        ("a.B", "expected '<LoginModule class> <flag>'"),
        ("a.B maybe;", "flag must be one of"),
        ("a.B required key;", "expected key=value"),
        ("a.B required key=;", "option key has no value"),
        ('a.B required password="secret"', "missing ';'"),
        ('a.B required password="unterminated;', "unexpected character"),
    ],
)
def test_malformed_text_names_the_problem_and_never_a_value(text: str, message: str) -> None:
    with pytest.raises(JaasConfigError, match=message) as raised:
        parse_jaas_config(text)
    assert "secret" not in str(raised.value)
