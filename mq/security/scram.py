"""SASL/SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802, RFC 7677) as Kafka's brokers use them, without I/O.

Credentials. A user's credential for one mechanism is ``(salt, StoredKey, ServerKey, iterations)``::

    SaltedPassword = Hi(password, salt, iterations)       PBKDF2-HMAC-<hash>; the password's UTF-8 bytes, no SASLprep
    StoredKey      = H(HMAC(SaltedPassword, "Client Key"))
    ServerKey      = HMAC(SaltedPassword, "Server Key")

Kafka keeps it in the user's entity config (``/config/users/<sanitized user>``, the key being the mechanism name) as
``salt=<base64>,stored_key=<base64>,server_key=<base64>,iterations=<n>`` (standard base64, padded). Both mechanisms
take 4096 to 16384 iterations (Kafka's bounds). AlterUserScramCredentials carries a salt and the salted password, and
the broker derives the two keys from them; a tool holding the password salts it itself.

The exchange (``ScramServer``), one client message in, one server message out::

    client-first  n,,n=<saslname>,r=<client nonce>           saslname: the user, "," as =2C and "=" as =3D
    server-first  r=<client nonce><server nonce>,s=<base64 salt>,i=<iterations>
    client-final  c=biws,r=<nonce>,p=<base64 proof>
    server-final  v=<base64 server signature>

scramp parses the messages, checks the nonce and the proof and signs the answer. librdkafka before 2.6.1 (Debian's
kcat among its users) repeats its own nonce in the client-final message (``r=<client nonce><client nonce><server
nonce>``) and computes its proof over that message; Kafka 3.8.1 to 3.9 accept it (the nonce need only end with the
server's), and so does this server: such a message is checked here (the proof over the message as sent, with the
stored keys), every other one by scramp. Every failure raises
``AuthenticationError``. A user without a credential for the mechanism gets a stand-in one (a salt derived from the
name with a key of this process, so a name always gets the same salt; 4096 iterations; keys no proof matches): the
exchange goes on and fails at the client-final message, as a wrong password does, so an attacker cannot probe for
names (Kafka's own server fails an unknown user at the client-first message). Where this server is stricter than
Kafka's: the user name is Kafka's (ASCII, no control characters), an authorization id in the gs2 header and SCRAM
extensions (``tokenauth``, for delegation tokens, which mq does not issue) are refused, and a stored credential whose
salt is under 12 bytes or whose iterations are under the minimum counts as absent.
"""

from __future__ import annotations

import base64
import binascii
import enum
import hashlib
import hmac
import re
import secrets
from collections.abc import Callable
from dataclasses import dataclass, field

import scramp

from mq.errors import ErrorCode
from mq.security.errors import AuthenticationError, invalid_credentials

MIN_ITERATIONS = 4096
MAX_ITERATIONS = 16384
DEFAULT_ITERATIONS = 4096
"""What kafka-configs uses when ``iterations=`` is not given."""
MIN_SALT_BYTES = 12
"""The shortest salt the exchange accepts (scramp's bound)."""


@dataclass(frozen=True)
class ScramMechanism:
    """One SCRAM mechanism: its SASL name, its type on the wire (Describe/AlterUserScramCredentials) and hash."""

    name: str
    type: int
    hash_name: str
    min_iterations: int = MIN_ITERATIONS
    max_iterations: int = MAX_ITERATIONS

    @property
    def digest_size(self) -> int:
        return hashlib.new(self.hash_name).digest_size


SCRAM_SHA_256 = ScramMechanism("SCRAM-SHA-256", 1, "sha256")
SCRAM_SHA_512 = ScramMechanism("SCRAM-SHA-512", 2, "sha512")
MECHANISMS = {m.name: m for m in (SCRAM_SHA_256, SCRAM_SHA_512)}
"""By name, in Kafka's order (the order in which it lists a user's credentials)."""


def mechanism_of_type(wire_type: int) -> ScramMechanism | None:
    """The mechanism of a wire type (1, 2); None for Kafka's UNKNOWN (0) and anything else."""
    return next((m for m in MECHANISMS.values() if m.type == wire_type), None)


def iterations_error(mechanism: ScramMechanism, iterations: int) -> str | None:
    """Why ``iterations`` is out of the mechanism's bounds (Kafka's admin API wording), or None."""
    if iterations < mechanism.min_iterations:
        return "Too few iterations"
    if iterations > mechanism.max_iterations:
        return "Too many iterations"
    return None


def salted_password(mechanism: ScramMechanism, password: str, salt: bytes, iterations: int) -> bytes:
    """Hi(password, salt, iterations) over the password's UTF-8 bytes, as Kafka's clients and tools compute it."""
    return hashlib.pbkdf2_hmac(mechanism.hash_name, password.encode("utf-8"), salt, iterations)


def new_salt() -> bytes:
    return secrets.token_bytes(32)


@dataclass(frozen=True)
class ScramCredential:
    """What the broker stores for one user and mechanism; the keys stay out of ``repr``."""

    salt: bytes = field(repr=False)
    stored_key: bytes = field(repr=False)
    server_key: bytes = field(repr=False)
    iterations: int

    @classmethod
    def from_salted_password(
        cls, mechanism: ScramMechanism, salt: bytes, salted: bytes, iterations: int
    ) -> ScramCredential:
        """The credential of an AlterUserScramCredentials upsertion: the keys derived from the salted password."""
        client_key = hmac.digest(salted, b"Client Key", mechanism.hash_name)
        return cls(
            salt,
            hashlib.new(mechanism.hash_name, client_key).digest(),
            hmac.digest(salted, b"Server Key", mechanism.hash_name),
            iterations,
        )

    @classmethod
    def from_password(
        cls, mechanism: ScramMechanism, password: str, iterations: int, salt: bytes | None = None
    ) -> ScramCredential:
        """A credential for ``password``, with a random salt unless one is given."""
        salt = new_salt() if salt is None else salt
        return cls.from_salted_password(
            mechanism, salt, salted_password(mechanism, password, salt, iterations), iterations
        )

    def to_string(self) -> str:
        """Kafka's stored form: ``salt=<b64>,stored_key=<b64>,server_key=<b64>,iterations=<n>``."""
        b64 = base64.b64encode
        return (
            f"salt={b64(self.salt).decode()},stored_key={b64(self.stored_key).decode()},"
            f"server_key={b64(self.server_key).decode()},iterations={self.iterations}"
        )

    @classmethod
    def from_string(cls, text: str) -> ScramCredential:
        """Parse the stored form (its four keys, each once, in any order); ValueError naming no value otherwise."""
        values: dict[str, str] = {}
        for item in text.split(","):
            key, sep, value = item.partition("=")
            if not sep or not key or key in values:
                raise ValueError("SCRAM credential is not salt=...,stored_key=...,server_key=...,iterations=...")
            values[key] = value
        if set(values) != {"salt", "stored_key", "server_key", "iterations"}:
            raise ValueError("SCRAM credential needs exactly salt, stored_key, server_key and iterations")
        if not re.fullmatch(r"[0-9]{1,9}", values["iterations"]):
            raise ValueError("SCRAM credential iterations is not a number")
        try:
            salt, stored_key, server_key = (
                base64.b64decode(values[k], validate=True) for k in ("salt", "stored_key", "server_key")
            )
        except binascii.Error:
            raise ValueError("SCRAM credential holds invalid base64") from None
        return cls(salt, stored_key, server_key, int(values["iterations"]))


CredentialLookup = Callable[[str], ScramCredential | None]
"""user name -> that user's credential for the exchange's mechanism, or None."""

_SASLNAME = r"(?:[\x01-\x2b\x2d-\x3c\x3e-\x7f]|=2C|=3D)+"
_CLIENT_FIRST = re.compile(rf"n,,n=(?P<saslname>{_SASLNAME}),r=[\x21-\x2b\x2d-\x7e]+")
"""Kafka's client-first message without an authorization id, the reserved ``m=`` or extensions."""
_REPEATED_NONCE = re.compile(
    r"(?P<without_proof>c=biws,r=(?P<nonce>[\x21-\x2b\x2d-\x7e]+)),p=(?P<proof>[A-Za-z0-9+/=]+)"
)
"""A client-final message without channel binding or extensions: checked here when its nonce repeats the client's."""
_STAND_IN_KEY = secrets.token_bytes(32)
"""Derives the salt of a user without a credential (fixed for the life of the process)."""


def username_of(saslname: str) -> str:
    """The user of a ``saslname`` (``=2C`` is ``,`` and ``=3D`` is ``=``)."""
    return saslname.replace("=2C", ",").replace("=3D", "=")


class _State(enum.Enum):
    CLIENT_FIRST = 1
    CLIENT_FINAL = 2
    COMPLETE = 3
    FAILED = 4


class ScramServer:
    """The broker's side of one SCRAM exchange: ``respond`` to the client-first, then to the client-final message;
    ``username`` is set once the exchange succeeded. Any failure (and any message after it) raises
    AuthenticationError."""

    def __init__(self, mechanism: str, lookup: CredentialLookup) -> None:
        found = MECHANISMS.get(mechanism)
        if found is None:
            raise AuthenticationError(
                f"Requested mechanism '{mechanism}' is not supported. Supported mechanisms are "
                f"'{', '.join(MECHANISMS)}'.",
                code=ErrorCode.UNSUPPORTED_SASL_MECHANISM,
            )
        self.mechanism = found
        self._lookup = lookup
        self._server = scramp.ScramMechanism(found.name).make_server(self._credential)
        self._state = _State.CLIENT_FIRST
        self._user = ""
        self._client_first_bare = self._server_first = self._client_nonce = self._nonce = ""
        self._stand_in = False
        self._stored: ScramCredential | None = None
        self.username: str | None = None
        """The authenticated user (Kafka's authorization id), once ``complete``."""

    @property
    def complete(self) -> bool:
        return self._state is _State.COMPLETE

    def respond(self, message: bytes) -> bytes:
        """The server's answer to the client's next message."""
        state = self._state
        self._state = _State.FAILED
        if state is _State.CLIENT_FIRST:
            answer = self._client_first(message)
        elif state is _State.CLIENT_FINAL:
            answer = self._client_final(message)
        else:
            raise self._failure(f"unexpected message in state {state.name}")
        return answer

    def _client_first(self, message: bytes) -> bytes:
        text = _text(message)
        match = None if text is None else _CLIENT_FIRST.fullmatch(text)
        if text is None or match is None:
            raise self._failure("malformed or unsupported client-first message")
        self._user = username_of(match.group("saslname"))
        credential = self._lookup(self._user)
        if credential is None or not self._usable(credential):
            credential = self._stand_in_credential()
            self._stand_in = True
        self._stored = credential
        try:
            self._server.set_client_first(text)
            answer: str = self._server.get_server_first()
        except scramp.ScramException:
            raise self._failure("malformed or unsupported client-first message") from None
        self._client_first_bare = text[3:]
        self._server_first = answer
        self._client_nonce = text.rsplit(",r=", 1)[1]
        self._nonce = answer[2:].split(",", 1)[0]
        self._state = _State.CLIENT_FINAL
        return answer.encode("ascii")

    def _repeated_nonce_final(self, message: re.Match[str]) -> str:
        """The server-final answer to a client-final message of librdkafka before 2.6.1 (see the module docstring):
        its proof over ``client-first-bare,server-first,<the message without its proof>``, checked with the stored
        key; ScramException when it does not match."""
        credential = self._stored
        assert credential is not None
        digest = self.mechanism.hash_name
        auth = f"{self._client_first_bare},{self._server_first},{message.group('without_proof')}".encode()
        try:
            proof = base64.b64decode(message.group("proof"), validate=True)
        except binascii.Error:
            raise scramp.ScramException("malformed proof") from None
        signature = hmac.digest(credential.stored_key, auth, digest)
        if len(proof) != len(signature):
            raise scramp.ScramException("malformed proof")
        client_key = bytes(a ^ b for a, b in zip(proof, signature, strict=True))
        if not hmac.compare_digest(hashlib.new(digest, client_key).digest(), credential.stored_key):
            raise scramp.ScramException("invalid proof")
        verifier = base64.b64encode(hmac.digest(credential.server_key, auth, digest)).decode()
        return f"v={verifier}"

    def _client_final(self, message: bytes) -> bytes:
        text = _text(message)
        if text is None:
            raise self._failure("malformed client-final message")
        try:
            repeated = _REPEATED_NONCE.fullmatch(text)
            if repeated is not None and repeated.group("nonce") == self._client_nonce + self._nonce:
                answer = self._repeated_nonce_final(repeated)
            else:
                self._server.set_client_final(text)
                answer = self._server.get_server_final()
        except scramp.ScramException:
            raise self._failure("invalid credentials or malformed client-final message") from None
        finally:
            self._stored = None
        if self._stand_in:  # no proof matches a stand-in's keys; this is a second lock
            raise self._failure("invalid credentials or malformed client-final message")
        self._state = _State.COMPLETE
        self.username = self._user
        return answer.encode("ascii")

    def _credential(self, _prepared_name: object) -> tuple[bytes, bytes, bytes, int]:
        """scramp's ``auth_fn``: the credential looked up for the name as Kafka reads it."""
        credential = self._stored
        assert credential is not None
        return credential.salt, credential.stored_key, credential.server_key, credential.iterations

    def _usable(self, credential: ScramCredential) -> bool:
        return len(credential.salt) >= MIN_SALT_BYTES and credential.iterations >= self.mechanism.min_iterations

    def _stand_in_credential(self) -> ScramCredential:
        size = self.mechanism.digest_size
        salt = hmac.digest(_STAND_IN_KEY, f"{self.mechanism.name}\0{self._user}".encode(), "sha256")
        return ScramCredential(salt, secrets.token_bytes(size), secrets.token_bytes(size), DEFAULT_ITERATIONS)

    def _failure(self, reason: str) -> AuthenticationError:
        return invalid_credentials(self.mechanism.name, reason)


def _text(message: bytes) -> str | None:
    try:
        return message.decode("utf-8")
    except UnicodeDecodeError:
        return None
