"""TLS for tests: a broker's server context from ``mq.tools.certs`` files, and a complete handshake between a client
and a server context in memory (no sockets), so a test sees what a real connection would verify."""

from __future__ import annotations

import ssl
from pathlib import Path

from mq.tools.certs import CertificateFiles


def server_context(identity: CertificateFiles, client_ca: Path | None = None) -> ssl.SSLContext:
    """A server presenting ``identity``; with ``client_ca`` it requires a client certificate issued by that CA."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(identity.certificate, identity.key)
    if client_ca is not None:
        context.verify_mode = ssl.CERT_REQUIRED
        context.load_verify_locations(client_ca)
    return context


def handshake(client: ssl.SSLContext, server: ssl.SSLContext, hostname: str = "localhost") -> ssl.SSLObject:
    """Run a TLS handshake to its end; returns the server's side (``getpeercert()`` is the client's certificate).
    A refusal raises the SSLError of the side that refused."""
    client_in, client_out, server_in, server_out = (ssl.MemoryBIO() for _ in range(4))
    tls_client = client.wrap_bio(client_in, client_out, server_hostname=hostname)
    tls_server = server.wrap_bio(server_in, server_out, server_side=True)
    finished: set[str] = set()
    for _ in range(10):
        for name, side, outgoing, peer_in in (
            ("client", tls_client, client_out, server_in),
            ("server", tls_server, server_out, client_in),
        ):
            try:
                side.do_handshake()
                finished.add(name)
            except ssl.SSLWantReadError:
                pass
            finally:
                if outgoing.pending:
                    peer_in.write(outgoing.read())
        if finished == {"client", "server"}:
            break
    assert finished == {"client", "server"}, f"handshake did not finish: {finished}"
    return tls_server
