"""Make a local CA, a broker certificate and client certificates for trying mq with TLS.

Usage: ``python scripts/make_certs.py --out DIR [--client NAME ...] [--host NAME ...] [--expired NAME ...]
[--untrusted NAME ...] [--days N] [--password PASSWORD]``, e.g.
``python scripts/make_certs.py --out certs --client alice --client bob``.

Writes ``ca.pem``/``ca.key``, ``broker.pem``/``broker.key``/``broker.p12`` (for localhost, 127.0.0.1 and each
``--host``), and ``NAME.pem``/``NAME.key``/``NAME.p12`` per ``--client`` (``CN=NAME``); ``--expired NAME`` adds a
broker-like certificate that has expired, ``--untrusted NAME`` one signed by another CA (``other-ca.pem``). The
``.p12`` stores hold key, certificate and CA under ``--password`` (default ``mq-secret``). See ``mq.tools.certs``.
"""

from __future__ import annotations

import argparse

from mq.tools.certs import DEFAULT_PASSWORD, make_certs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True, help="Directory to write into (created if missing).")
    parser.add_argument("--client", action="append", default=[], metavar="NAME", help="A client certificate, CN=NAME.")
    parser.add_argument("--host", action="append", default=[], metavar="NAME", help="Another name of the broker.")
    parser.add_argument("--expired", action="append", default=[], metavar="NAME", help="An expired certificate.")
    parser.add_argument("--untrusted", action="append", default=[], metavar="NAME", help="One from another CA.")
    parser.add_argument("--days", type=int, default=365, help="Validity in days (default 365).")
    parser.add_argument("--password", default=DEFAULT_PASSWORD, help="Password of the .p12 files.")
    args = parser.parse_args()
    made = make_certs(
        args.out,
        clients=args.client,
        hosts=args.host,
        expired=args.expired,
        untrusted=args.untrusted,
        days=args.days,
        password=args.password,
    )
    files = [made.ca, made.broker.certificate, *(c.certificate for c in made.clients.values())]
    files += [c.certificate for c in (*made.expired.values(), *made.untrusted.values())]
    print("\n".join(str(path) for path in files))


if __name__ == "__main__":
    main()
