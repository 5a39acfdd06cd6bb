"""SCRAM without sockets: the broker's side of the exchange against scramp's client, RFC 7677's test vector, the
stored form of a credential, and failures that tell neither the password nor whether the user exists."""

from __future__ import annotations

import base64
import hashlib
import hmac
import re
from collections.abc import Callable

import pytest
import scramp

from mq.errors import ErrorCode
from mq.security.errors import AuthenticationError
from mq.security.scram import (
    MECHANISMS,
    SCRAM_SHA_256,
    SCRAM_SHA_512,
    ScramCredential,
    ScramMechanism,
    ScramServer,
    iterations_error,
    mechanism_of_type,
)

PASSWORD = "alice-secret"
BOTH = pytest.mark.parametrize("mechanism", [SCRAM_SHA_256, SCRAM_SHA_512], ids=lambda m: m.name)


def server_for(mechanism: ScramMechanism, users: dict[str, ScramCredential]) -> ScramServer:
    return ScramServer(mechanism.name, users.get)


def alice(mechanism: ScramMechanism, iterations: int = 8192) -> dict[str, ScramCredential]:
    return {"alice": ScramCredential.from_password(mechanism, PASSWORD, iterations)}


def attempt(server: ScramServer, user: str, password: str, mechanism: ScramMechanism) -> tuple[bytes, bytes]:
    """The client-first and server-first messages; then the client-final is sent (which may raise)."""
    client = scramp.ScramClient([mechanism.name], user, password)
    first = client.get_client_first().encode()
    server_first = server.respond(first)
    client.set_server_first(server_first.decode())
    final = client.get_client_final().encode()
    server.respond(final)
    return first, final


@BOTH
def test_a_full_exchange_with_scramps_client_authenticates_the_user(mechanism: ScramMechanism) -> None:
    server = server_for(mechanism, alice(mechanism))
    client = scramp.ScramClient([mechanism.name], "alice", PASSWORD)
    server_first = server.respond(client.get_client_first().encode()).decode()
    client.set_server_first(server_first)
    assert re.fullmatch(r"r=[\x21-\x2b\x2d-\x7e]+,s=[A-Za-z0-9+/=]+,i=8192", server_first)
    assert not server.complete and server.username is None
    server_final = server.respond(client.get_client_final().encode()).decode()
    client.set_server_final(server_final)  # raises unless the server proved it holds the server key
    assert server.complete and server.username == "alice"


def test_names_with_commas_and_equals_signs_travel_escaped() -> None:
    users = {"a,b=c": ScramCredential.from_password(SCRAM_SHA_256, PASSWORD, 4096)}
    server = server_for(SCRAM_SHA_256, users)
    first, _ = attempt(server, "a,b=c", PASSWORD, SCRAM_SHA_256)
    assert b"n=a=2Cb=3Dc," in first
    assert server.username == "a,b=c"


def test_rfc7677_vector_is_verified_by_a_credential_made_from_the_password() -> None:
    salt = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
    credential = ScramCredential.from_password(SCRAM_SHA_256, "pencil", 4096, salt)
    auth_message = (
        b"n=user,r=rOprNGfwEbeRWgbNEkqO,"
        b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096,"
        b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
    )
    proof = base64.b64decode("dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=")
    signature = hmac.digest(credential.stored_key, auth_message, "sha256")
    client_key = bytes(a ^ b for a, b in zip(proof, signature, strict=True))
    assert hashlib.sha256(client_key).digest() == credential.stored_key
    server_signature = hmac.digest(credential.server_key, auth_message, "sha256")
    assert base64.b64encode(server_signature) == b"6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="


@BOTH
def test_credentials_match_scramps_for_the_same_salt(mechanism: ScramMechanism) -> None:
    ours = ScramCredential.from_password(mechanism, PASSWORD, 4096)
    salt, stored_key, server_key, iterations = scramp.ScramMechanism(mechanism.name).make_auth_info(
        PASSWORD, 4096, salt=ours.salt
    )
    assert ours == ScramCredential(salt, stored_key, server_key, iterations)
    salted = hashlib.pbkdf2_hmac(mechanism.hash_name, PASSWORD.encode(), ours.salt, 4096)
    assert ScramCredential.from_salted_password(mechanism, ours.salt, salted, 4096) == ours


@BOTH
def test_a_wrong_password_and_an_unknown_user_fail_alike_at_the_final_message(mechanism: ScramMechanism) -> None:
    failures = []
    for user, password in (("alice", "wrong-secret"), ("mallory", PASSWORD)):
        server = server_for(mechanism, alice(mechanism))
        client = scramp.ScramClient([mechanism.name], user, password)
        server_first = server.respond(client.get_client_first().encode())  # the first step passes for both
        client.set_server_first(server_first.decode())
        final = client.get_client_final()
        proof = final.rsplit("p=", 1)[1]
        with pytest.raises(AuthenticationError) as failed:
            server.respond(final.encode())
        error = failed.value
        assert error.code == ErrorCode.SASL_AUTHENTICATION_FAILED
        for secret in (password, proof):
            assert secret not in str(error) and secret not in error.reason
        assert not server.complete and server.username is None
        failures.append((str(error), error.reason))
    assert failures[0] == failures[1]
    assert "invalid credentials" in failures[0][0] and mechanism.name in failures[0][0]


def test_an_unknown_user_gets_a_salt_of_the_same_shape_and_the_same_salt_each_time() -> None:
    def salt_and_iterations(user: str) -> tuple[bytes, int]:
        server = server_for(SCRAM_SHA_256, alice(SCRAM_SHA_256, 4096))
        answer = server.respond(scramp.ScramClient([SCRAM_SHA_256.name], user, "x").get_client_first().encode())
        fields = dict(item.split("=", 1) for item in answer.decode().split(","))
        return base64.b64decode(fields["s"]), int(fields["i"])

    known_salt, known_iterations = salt_and_iterations("alice")
    unknown_salt, unknown_iterations = salt_and_iterations("mallory")
    assert len(unknown_salt) == len(known_salt) and unknown_iterations == known_iterations == 4096
    assert salt_and_iterations("mallory")[0] == unknown_salt  # probing twice shows nothing new
    assert salt_and_iterations("trudy")[0] != unknown_salt


def test_a_credential_of_the_other_mechanism_does_not_authenticate() -> None:
    server = server_for(SCRAM_SHA_512, {})
    with pytest.raises(AuthenticationError):
        attempt(server, "alice", PASSWORD, SCRAM_SHA_512)
    lookups: list[str] = []
    server = ScramServer(SCRAM_SHA_512.name, lambda user: lookups.append(user) or None)
    with pytest.raises(AuthenticationError):
        attempt(server, "alice", PASSWORD, SCRAM_SHA_512)
    assert lookups == ["alice"]


def test_a_stored_credential_below_the_minimum_iterations_counts_as_absent() -> None:
    weak = ScramCredential.from_password(SCRAM_SHA_256, PASSWORD, 4096)
    weak = ScramCredential(weak.salt, weak.stored_key, weak.server_key, 1024)
    with pytest.raises(AuthenticationError):
        attempt(server_for(SCRAM_SHA_256, {"alice": weak}), "alice", PASSWORD, SCRAM_SHA_256)


@pytest.mark.parametrize(
    "message",
    [
        b"",
        b"garbage",
        b"\xff\xfe",
        b"n,,n=alice",  # no nonce
        b"y,,n=alice,r=abc",  # Kafka's clients send n
        b"n,a=alice,n=alice,r=abc",  # an authorization id
        b"n,,n=alice,r=abc,tokenauth=true",  # Kafka's delegation-token extension
        b"n,,m=x,n=alice,r=abc",
        b"n,,n=al=ice,r=abc",  # '=' not escaped
        b"n,,n=\xc3\xa5lice,r=abc",  # Kafka's names are ASCII
    ],
)
def test_a_malformed_or_unsupported_client_first_message_is_refused(message: bytes) -> None:
    server = server_for(SCRAM_SHA_256, alice(SCRAM_SHA_256))
    with pytest.raises(AuthenticationError) as failed:
        server.respond(message)
    assert failed.value.code == ErrorCode.SASL_AUTHENTICATION_FAILED
    with pytest.raises(AuthenticationError):  # a failed exchange stays failed
        server.respond(b"n,,n=alice,r=abc")


@pytest.mark.parametrize(
    "tamper",
    [
        lambda final, nonce: b"garbage",
        lambda final, nonce: b"\xff",
        lambda final, nonce: final.replace(nonce.encode(), nonce[:-1].encode() + b"X"),  # another nonce
        lambda final, nonce: final.rsplit(b"p=", 1)[0] + b"p=" + base64.b64encode(b"\0" * 32),  # another proof
        lambda final, nonce: final.rsplit(b",p=", 1)[0],  # no proof
    ],
)
def test_a_malformed_or_forged_client_final_message_is_refused(tamper: Callable[[bytes, str], bytes]) -> None:
    server = server_for(SCRAM_SHA_256, alice(SCRAM_SHA_256))
    client = scramp.ScramClient([SCRAM_SHA_256.name], "alice", PASSWORD)
    server_first = server.respond(client.get_client_first().encode()).decode()
    client.set_server_first(server_first)
    final = client.get_client_final().encode()
    nonce = server_first.split(",")[0][2:]
    with pytest.raises(AuthenticationError) as failed:
        server.respond(tamper(final, nonce))
    assert PASSWORD not in str(failed.value) and not server.complete
    with pytest.raises(AuthenticationError):
        server.respond(final)  # the genuine message comes too late


def test_nothing_is_answered_after_a_completed_exchange() -> None:
    server = server_for(SCRAM_SHA_256, alice(SCRAM_SHA_256))
    first, _ = attempt(server, "alice", PASSWORD, SCRAM_SHA_256)
    assert server.complete
    with pytest.raises(AuthenticationError):
        server.respond(first)


def test_an_unknown_mechanism_is_refused_with_unsupported_sasl_mechanism() -> None:
    with pytest.raises(AuthenticationError) as failed:
        ScramServer("SCRAM-SHA-1", {}.get)
    assert failed.value.code == ErrorCode.UNSUPPORTED_SASL_MECHANISM
    assert "SCRAM-SHA-256, SCRAM-SHA-512" in str(failed.value)


def test_the_stored_form_round_trips_and_keeps_keys_out_of_repr() -> None:
    credential = ScramCredential.from_password(SCRAM_SHA_512, PASSWORD, 4096)
    text = credential.to_string()
    assert re.fullmatch(
        r"salt=[A-Za-z0-9+/]+=*,stored_key=[A-Za-z0-9+/]+=*,server_key=[A-Za-z0-9+/]+=*,iterations=4096", text
    )
    assert ScramCredential.from_string(text) == credential
    reordered = ",".join(reversed(text.split(",")))
    assert ScramCredential.from_string(reordered) == credential
    assert repr(credential) == "ScramCredential(iterations=4096)"
    assert len(credential.stored_key) == len(credential.server_key) == 64


def test_the_stored_form_of_kafka_is_read() -> None:
    text = "salt=MWtxOG56cHNybGhoNGhyMDA4NzN0OWk3MXE=,stored_key=AQID,server_key=BAUG,iterations=4096"
    credential = ScramCredential.from_string(text)
    assert credential.salt == b"1kq8nzpsrlhh4hr00873t9i71q"
    assert (credential.stored_key, credential.server_key, credential.iterations) == (b"\1\2\3", b"\4\5\6", 4096)


@pytest.mark.parametrize(
    "text",
    [
        "",
        "salt=AQID,stored_key=AQID,server_key=AQID",
        "salt=AQID,stored_key=AQID,server_key=AQID,iterations=4096,extra=1",
        "salt=AQID,salt=AQID,server_key=AQID,iterations=4096",
        "salt=AQID,stored_key=AQID,server_key=AQID,iterations=many",
        "salt=not*base64,stored_key=AQID,server_key=AQID,iterations=4096",
        "salt=AQID,stored_key=AQID,server_key,iterations=4096",
    ],
)
def test_a_malformed_stored_form_is_refused_without_repeating_it(text: str) -> None:
    with pytest.raises(ValueError) as failed:
        ScramCredential.from_string(text)
    assert "AQID" not in str(failed.value) and "many" not in str(failed.value)


def test_mechanisms_have_kafkas_names_types_and_iteration_bounds() -> None:
    assert list(MECHANISMS) == ["SCRAM-SHA-256", "SCRAM-SHA-512"]
    assert mechanism_of_type(1) is SCRAM_SHA_256 and mechanism_of_type(2) is SCRAM_SHA_512
    assert mechanism_of_type(0) is None and mechanism_of_type(3) is None
    assert iterations_error(SCRAM_SHA_256, 4095) == "Too few iterations"
    assert iterations_error(SCRAM_SHA_512, 16385) == "Too many iterations"
    assert iterations_error(SCRAM_SHA_256, 4096) is None and iterations_error(SCRAM_SHA_512, 16384) is None


def repeated_nonce_final(mechanism: ScramMechanism, password: str, client_first: str, server_first: str) -> str:
    """What librdkafka before 2.6.1 sends: its own nonce again before the server's, the proof computed over that."""
    fields = dict(part.split("=", 1) for part in server_first.split(","))
    client_nonce = client_first.rsplit(",r=", 1)[1]
    salted = hashlib.pbkdf2_hmac(
        mechanism.hash_name, password.encode(), base64.b64decode(fields["s"]), int(fields["i"])
    )
    client_key = hmac.digest(salted, b"Client Key", mechanism.hash_name)
    stored_key = hashlib.new(mechanism.hash_name, client_key).digest()
    without_proof = f"c=biws,r={client_nonce}{fields['r']}"
    auth = f"{client_first[3:]},{server_first},{without_proof}".encode()
    signature = hmac.digest(stored_key, auth, mechanism.hash_name)
    proof = base64.b64encode(bytes(a ^ b for a, b in zip(client_key, signature, strict=True))).decode()
    return f"{without_proof},p={proof}"


@BOTH
def test_older_librdkafkas_repeated_nonce_authenticates_with_the_right_password_only(
    mechanism: ScramMechanism,
) -> None:
    for password, accepted in ((PASSWORD, True), ("wrong", False)):
        server = server_for(mechanism, alice(mechanism))
        client_first = "n,,n=alice,r=F3;wtg-8jrp`[IcZM96ejKqL/0bL:/Az"
        server_first = server.respond(client_first.encode()).decode()
        final = repeated_nonce_final(mechanism, password, client_first, server_first)
        if not accepted:
            with pytest.raises(AuthenticationError):
                server.respond(final.encode())
            continue
        server_final = server.respond(final.encode()).decode()
        assert server.complete and server.username == "alice" and server_final.startswith("v=")
    other = server_for(mechanism, alice(mechanism))  # a nonce that merely ends with the server's is not taken
    client_first = "n,,n=alice,r=abcdef"
    server_first = other.respond(client_first.encode()).decode()
    forged = repeated_nonce_final(mechanism, PASSWORD, client_first, server_first).replace("r=abcdef", "r=xyzabcdef", 1)
    with pytest.raises(AuthenticationError):
        other.respond(forged.encode())
