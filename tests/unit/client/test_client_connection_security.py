"""BrokerConnection with TLS and SASL against a fake broker (asyncio TLS server, real SaslHandshake and
SaslAuthenticate messages; SCRAM answered by scramp's server side)."""

from __future__ import annotations

import asyncio
import socket
import ssl
import threading
from collections.abc import Callable
from typing import Any

import pytest
from client_fakes import SASL_PASSWORD as PASSWORD
from client_fakes import FakeBroker, metadata_handler, run, sasl_broker
from scramp import ScramException, ScramMechanism

from mq.client.admin import AsyncAdmin
from mq.client.connection import AuthenticationError, BrokerConnection, BrokerConnectionError
from mq.client.security import ClientSecurity, client_security
from mq.errors import ErrorCode
from mq.protocol.api_keys import ApiKey
from mq.protocol.codec import RequestHeader
from mq.tools.certs import Certificates, make_certs
from tests.tls_helpers import server_context


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Certificates:
    return make_certs(tmp_path_factory.mktemp("certs"), clients=["alice"], expired=["old"], untrusted=["rogue"])


def _tls(certs: Certificates, **extra: str) -> dict[str, str]:
    return {"ssl.ca.location": str(certs.ca), **extra}


def _sasl(mechanism: str, password: str = PASSWORD, protocol: str = "SASL_PLAINTEXT", **extra: str) -> ClientSecurity:
    return client_security(
        {
            "security.protocol": protocol,
            "sasl.mechanism": mechanism,
            "sasl.username": "alice",
            "sasl.password": password,
            **extra,
        }
    )


def _md() -> dict[str, Any]:
    return {"topics": [], "allow_auto_topic_creation": False, "include_topic_authorized_operations": False}


async def _exchange(broker: FakeBroker, security: ClientSecurity, host: str | None = None) -> BrokerConnection:
    """Connect to a started ``broker`` with ``security`` and send one Metadata request; the connection stays open."""
    conn = BrokerConnection(host or broker.host, broker.port, security=security, request_timeout_ms=5000)
    try:
        response = await conn.send(ApiKey.METADATA, _md())
    except BaseException:
        await conn.close()
        raise
    assert [b.node_id for b in response.brokers] == [0]
    return conn


def _api_calls(broker: FakeBroker) -> list[tuple[str, int]]:
    return [(ApiKey(h.api_key).name, h.api_version) for h, _ in broker.requests]


def _fails(make: Callable[[], FakeBroker], security: ClientSecurity, host: str | None = None) -> AuthenticationError:
    """The AuthenticationError a connection to a fresh broker ``make`` builds fails with (after which its socket is
    closed)."""

    async def main() -> AuthenticationError:
        broker = await make().start()
        conn = BrokerConnection(host or broker.host, broker.port, security=security, request_timeout_ms=5000)
        try:
            with pytest.raises(AuthenticationError) as info:
                await conn.send(ApiKey.METADATA, _md())
            assert not conn.connected
            return info.value
        finally:
            await conn.close()
            await broker.stop()

    error: AuthenticationError = run(main())
    assert not error.code.retriable
    return error


def test_ssl_connection_verifies_thesasl_broker(certs: Certificates) -> None:
    async def main() -> None:
        broker = await FakeBroker(ssl_context=server_context(certs.broker)).start()
        broker.handlers[ApiKey.METADATA] = metadata_handler([broker], {})
        conn = await _exchange(broker, client_security({"security.protocol": "SSL", **_tls(certs)}))
        await conn.close()
        await broker.stop()
        assert _api_calls(broker) == [("API_VERSIONS", 3), ("METADATA", 12)]

    run(main())


@pytest.mark.parametrize(
    ("identity", "reason"),
    [("old", "certificate has expired"), ("rogue", "unable to get local issuer certificate")],
)
def test_broker_certificate_refused(certs: Certificates, identity: str, reason: str) -> None:
    files = certs.expired.get(identity) or certs.untrusted[identity]
    error = _fails(
        lambda: FakeBroker(ssl_context=server_context(files)),
        client_security({"security.protocol": "SSL", **_tls(certs)}),
    )
    assert str(error).startswith("TLS handshake with 127.0.0.1:")
    assert reason in str(error)


def test_host_name_is_checked_unless_endpoint_identification_is_off(certs: Certificates) -> None:
    """127.0.0.2 is not a name of the broker's certificate (localhost, 127.0.0.1)."""
    error = _fails(
        lambda: FakeBroker(host="127.0.0.2", ssl_context=server_context(certs.broker)),
        client_security({"security.protocol": "SSL", **_tls(certs)}),
    )
    assert "IP address mismatch, certificate is not valid for '127.0.0.2'" in str(error)

    async def main() -> None:
        broker = await FakeBroker(host="127.0.0.2", ssl_context=server_context(certs.broker)).start()
        broker.handlers[ApiKey.METADATA] = metadata_handler([broker], {})
        unchecked = {"security.protocol": "SSL", **_tls(certs, **{"ssl.endpoint.identification.algorithm": ""})}
        conn = await _exchange(broker, client_security(unchecked))
        await conn.close()
        await broker.stop()

    run(main())


def test_client_certificate_is_presented(certs: Certificates) -> None:
    alice = certs.clients["alice"]
    requiring = server_context(certs.broker, client_ca=certs.ca)
    with_certificate = client_security(
        {
            "security.protocol": "SSL",
            **_tls(certs),
            "ssl.certificate.location": str(alice.certificate),
            "ssl.key.location": str(alice.key),
        }
    )

    async def main() -> None:
        broker = await FakeBroker(ssl_context=requiring).start()
        broker.handlers[ApiKey.METADATA] = metadata_handler([broker], {})
        conn = await _exchange(broker, with_certificate)
        await conn.close()
        await broker.stop()
        [peer] = broker.peer_certificates
        assert peer is not None
        assert dict(a[0] for a in peer["subject"]) == {"commonName": "alice"}

    run(main())


def test_missing_client_certificate_refused_during_a_tls12_handshake(certs: Certificates) -> None:
    """With TLS 1.2 the broker's alert ends the client's handshake: a non-retriable AuthenticationError. (A blocking
    server: OpenSSL sends the alert before closing, which asyncio's server side does not.)"""
    requiring = server_context(certs.broker, client_ca=certs.ca)
    requiring.maximum_version = ssl.TLSVersion.TLSv1_2
    listener = socket.create_server(("127.0.0.1", 0))
    refusals: list[str] = []

    def serve() -> None:
        accepted, _ = listener.accept()
        try:
            requiring.wrap_socket(accepted, server_side=True)
        except ssl.SSLError as exc:
            refusals.append(str(exc.reason))
        finally:
            accepted.close()

    server = threading.Thread(target=serve)
    server.start()
    try:
        conn = BrokerConnection(
            "127.0.0.1",
            listener.getsockname()[1],
            security=client_security({"security.protocol": "SSL", **_tls(certs)}),
        )

        async def main() -> None:
            with pytest.raises(AuthenticationError) as info:
                await conn.connect()
            assert str(info.value).startswith("TLS handshake with 127.0.0.1:")
            assert "ALERT_HANDSHAKE_FAILURE" in str(info.value)
            assert not info.value.code.retriable

        run(main())
    finally:
        server.join(10)
        listener.close()
    assert refusals == ["PEER_DID_NOT_RETURN_A_CERTIFICATE"]


def test_missing_client_certificate_after_a_tls13_handshake_is_explained(certs: Certificates) -> None:
    async def main() -> None:
        broker = await FakeBroker(ssl_context=server_context(certs.broker, client_ca=certs.ca)).start()
        conn = BrokerConnection(
            broker.host, broker.port, security=client_security({"security.protocol": "SSL", **_tls(certs)})
        )
        with pytest.raises(BrokerConnectionError) as info:
            await conn.connect()
        await conn.close()
        await broker.stop()
        assert "the broker may have refused this client's certificate" in str(info.value)

    run(main())


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_sasl_ssl_authenticates_after_api_versions(certs: Certificates, mechanism: str) -> None:
    async def main() -> None:
        broker = await sasl_broker(enabled=(mechanism,), ssl_context=server_context(certs.broker)).start()
        conn = await _exchange(broker, _sasl(mechanism, protocol="SASL_SSL", **_tls(certs)))
        await conn.close()
        await broker.stop()
        tokens = 1 if mechanism == "PLAIN" else 2
        expected = [("API_VERSIONS", 3), ("SASL_HANDSHAKE", 1)] + [("SASL_AUTHENTICATE", 2)] * tokens
        assert _api_calls(broker) == [*expected, ("METADATA", 12)]
        assert [b.mechanism for _, b in broker.of(ApiKey.SASL_HANDSHAKE)] == [mechanism]
        if mechanism == "PLAIN":
            assert [b.auth_bytes for _, b in broker.of(ApiKey.SASL_AUTHENTICATE)] == [b"\0alice\0alice-secret"]

    run(main())


def test_sasl_authenticate_uses_the_highest_common_version() -> None:
    async def main() -> None:
        broker = sasl_broker()
        broker.versions[ApiKey.SASL_AUTHENTICATE] = (0, 0)
        await broker.start()
        conn = await _exchange(broker, _sasl("PLAIN"))
        await conn.close()
        await broker.stop()
        assert [h.api_version for h, _ in broker.of(ApiKey.SASL_AUTHENTICATE)] == [0]

    run(main())


@pytest.mark.parametrize(
    ("mechanism", "message"),
    [
        ("PLAIN", "Authentication failed: Invalid username or password"),
        (
            "SCRAM-SHA-256",
            "Authentication failed during authentication due to invalid credentials with SASL mechanism SCRAM-SHA-256",
        ),
    ],
)
def test_wrong_password_fails_with_the_brokers_message(mechanism: str, message: str) -> None:
    error = _fails(lambda: sasl_broker(enabled=(mechanism,)), _sasl(mechanism, password="wrong-secret"))
    assert str(error) == message
    assert error.code == ErrorCode.SASL_AUTHENTICATION_FAILED


def test_mechanism_the_broker_does_not_enable() -> None:
    error = _fails(lambda: sasl_broker(enabled=("PLAIN", "SCRAM-SHA-512")), _sasl("SCRAM-SHA-256"))
    assert error.code == ErrorCode.UNSUPPORTED_SASL_MECHANISM
    assert "refused SASL mechanism SCRAM-SHA-256" in str(error)
    assert "enabled: PLAIN, SCRAM-SHA-512" in str(error)
    assert PASSWORD not in str(error)


def test_scram_broker_that_does_not_know_the_password_is_not_trusted() -> None:
    """A broker that accepts any proof but cannot sign with the real password's key is refused by the client."""

    def make() -> FakeBroker:
        broker = sasl_broker(enabled=("SCRAM-SHA-256",))
        impostor = ScramMechanism("SCRAM-SHA-256")
        auth = impostor.make_auth_info("another-password", iteration_count=4096)
        server = impostor.make_server(lambda username: auth)

        def authenticate(header: RequestHeader, body: Any) -> Any:
            if body.auth_bytes.startswith(b"n,,"):
                server.set_client_first(body.auth_bytes.decode())
                return {"error_code": 0, "auth_bytes": server.get_server_first().encode()}
            with pytest.raises(ScramException):
                server.set_client_final(body.auth_bytes.decode())
            return {"error_code": 0, "auth_bytes": b"v=" + b"A" * 44}

        broker.handlers[ApiKey.SASL_AUTHENTICATE] = authenticate
        return broker

    error = _fails(make, _sasl("SCRAM-SHA-256"))
    assert "did not prove that it knows the password" in str(error)


def test_session_with_a_lifetime_is_renewed_on_the_same_connection() -> None:
    async def main() -> None:
        broker = await sasl_broker(lifetime_ms=1).start()
        conn = await _exchange(broker, _sasl("PLAIN"))
        await asyncio.sleep(0.01)  # past the 1 ms lifetime
        await conn.send(ApiKey.METADATA, _md())
        await conn.close()
        await broker.stop()
        assert broker.connections == 1
        calls = [name for name, _ in _api_calls(broker)]
        assert calls == ["API_VERSIONS", "SASL_HANDSHAKE", "SASL_AUTHENTICATE", "METADATA"] * 1 + [
            "SASL_HANDSHAKE",
            "SASL_AUTHENTICATE",
            "METADATA",
        ]

    run(main())


def test_session_without_a_lifetime_is_not_renewed() -> None:
    async def main() -> None:
        broker = await sasl_broker().start()
        conn = await _exchange(broker, _sasl("PLAIN"))
        await asyncio.sleep(0.01)
        await conn.send(ApiKey.METADATA, _md())
        await conn.close()
        await broker.stop()
        assert len(broker.of(ApiKey.SASL_HANDSHAKE)) == 1

    run(main())


def test_broker_closing_instead_of_renewing_means_a_fresh_connection() -> None:
    async def main() -> None:
        broker = await sasl_broker(lifetime_ms=1).start()
        conn = await _exchange(broker, _sasl("PLAIN"))
        renewal = broker.handlers[ApiKey.SASL_HANDSHAKE]

        def refuse_renewal(header: RequestHeader, body: Any) -> Any:
            broker.handlers[ApiKey.SASL_HANDSHAKE] = renewal
            broker.drop_connections()
            return None

        broker.handlers[ApiKey.SASL_HANDSHAKE] = refuse_renewal
        await asyncio.sleep(0.01)
        with pytest.raises(BrokerConnectionError):
            await conn.send(ApiKey.METADATA, _md())
        await conn.send(ApiKey.METADATA, _md())
        await conn.close()
        await broker.stop()
        assert broker.connections == 2

    run(main())


def test_plaintext_client_against_a_tls_broker_does_not_hang(certs: Certificates) -> None:
    async def main() -> None:
        broker = await FakeBroker(ssl_context=server_context(certs.broker)).start()
        conn = BrokerConnection(broker.host, broker.port, request_timeout_ms=2000)
        with pytest.raises(BrokerConnectionError):
            await conn.send(ApiKey.METADATA, _md())
        await conn.close()
        await broker.stop()

    run(main())


def test_admin_client_connects_with_its_security(certs: Certificates) -> None:
    async def main() -> None:
        broker = await sasl_broker(enabled=("SCRAM-SHA-512",), ssl_context=server_context(certs.broker)).start()
        security = _sasl("SCRAM-SHA-512", protocol="SASL_SSL", **_tls(certs))
        async with AsyncAdmin(f"{broker.host}:{broker.port}", security=security) as admin:
            assert admin.cluster.security is security
            assert await admin.list_topics() == []
            assert admin.cluster.connection(0).security is security
        await broker.stop()
        assert len(broker.of(ApiKey.SASL_HANDSHAKE)) == broker.connections

    run(main())
