"""Client certificate principals under ``ssl.principal.mapping.rules``, as Kafka's SslPrincipalMapper maps them."""

from __future__ import annotations

from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives.serialization import Encoding

from mq.security.principal import PrincipalMapper, PrincipalMappingError, subject_name
from mq.tools.certs import make_certs

DN = "CN=kafka1,OU=ServiceUsers,O=Example,L=Town,ST=State,C=US"


@pytest.mark.parametrize(
    ("rules", "expected"),
    [
        ("DEFAULT", DN),
        ("", DN),
        ("RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/", "kafka1"),
        ("RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$3/U", "KAFKA1@EXAMPLE"),
        ("RULE:^CN=admin,.*$/admin/, RULE:^CN=(.*?),.*$/$1/L", "kafka1"),
        ("RULE:^CN=nobody,.*$/x/,DEFAULT", DN),
        ("RULE:^CN=(.*?),OU=Service(.*?),.*$/$1\\/$2/", "kafka1/Users"),
    ],
)
def test_rules_map_a_distinguished_name_as_kafka_does(rules: str, expected: str) -> None:
    assert PrincipalMapper(rules).name_of(DN) == expected


def test_a_name_no_rule_maps_has_no_principal() -> None:
    assert PrincipalMapper("RULE:^CN=admin$/admin/").name_of(DN) is None


@pytest.mark.parametrize("rules", ["RULE:^CN=(.*$/$1/", "RULE:no-slashes", "SOMETHING"])
def test_malformed_rules_are_refused(rules: str) -> None:
    with pytest.raises(PrincipalMappingError):
        PrincipalMapper(rules)


def test_a_certificate_subject_is_named_most_specific_first(tmp_path: Path) -> None:
    certs = make_certs(tmp_path, clients=["alice"])
    der = x509.load_pem_x509_certificate(certs.clients["alice"].certificate.read_bytes()).public_bytes(Encoding.DER)
    assert subject_name(der) == "CN=alice"
    assert PrincipalMapper("DEFAULT").principal_of_certificate(der) == "User:CN=alice"
