"""Secrets of dynamic broker configs as Kafka stores them in ZooKeeper: encrypted with ``password.encoder.secret``.

The stored value is Kafka's ``key:value`` list, comma-separated::

    keyFactoryAlgorithm:PBKDF2WithHmacSHA512,cipherAlgorithm:AES/CBC/PKCS5Padding,keyLength:128,
    salt:<base64, 256 random bytes>,iterations:4096,encryptedPassword:<base64>,passwordLength:<chars>,
    initializationVector:<base64, 16 bytes>

The AES key is PBKDF2-HMAC-SHA512 of the secret's UTF-8 bytes over the salt (``keyLength`` bits); the password's
UTF-8 bytes are encrypted with AES-CBC and PKCS#5 padding. Decoding tries the secret, then
``password.encoder.old.secret`` (a secret being rotated).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import os

from cryptography.hazmat.primitives import padding
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

KEY_FACTORY = "PBKDF2WithHmacSHA512"
CIPHER = "AES/CBC/PKCS5Padding"
KEY_LENGTH = 128
ITERATIONS = 4096
SALT_BYTES = 256


class PasswordEncoderError(ValueError):
    """A secret cannot be stored or read back: no encoder secret, or a value that does not decode."""


def encode(password: str, secret: str, key_length: int = KEY_LENGTH, iterations: int = ITERATIONS) -> str:
    """``password`` in Kafka's encrypted form under ``secret``."""
    salt = os.urandom(SALT_BYTES)
    iv = os.urandom(16)
    key = _key(secret, salt, iterations, key_length)
    padder = padding.PKCS7(128).padder()
    plain = padder.update(password.encode()) + padder.finalize()
    encryptor = Cipher(algorithms.AES(key), modes.CBC(iv)).encryptor()
    encrypted = encryptor.update(plain) + encryptor.finalize()
    fields = {
        "keyFactoryAlgorithm": KEY_FACTORY,
        "cipherAlgorithm": CIPHER,
        "keyLength": str(key_length),
        "salt": base64.b64encode(salt).decode(),
        "iterations": str(iterations),
        "encryptedPassword": base64.b64encode(encrypted).decode(),
        "passwordLength": str(len(password)),
        "initializationVector": base64.b64encode(iv).decode(),
    }
    return ",".join(f"{name}:{value}" for name, value in fields.items())


def decode(stored: str, secret: str, old_secret: str | None = None) -> str:
    """The password of a value ``encode`` wrote, under ``secret`` or else ``old_secret``."""
    fields = dict(part.partition(":")[::2] for part in stored.split(","))
    try:
        if fields.get("keyFactoryAlgorithm") != KEY_FACTORY or fields.get("cipherAlgorithm") != CIPHER:
            raise PasswordEncoderError("an encoded password of another algorithm")
        salt = base64.b64decode(fields["salt"], validate=True)
        iv = base64.b64decode(fields["initializationVector"], validate=True)
        encrypted = base64.b64decode(fields["encryptedPassword"], validate=True)
        iterations, key_length, length = (int(fields[k]) for k in ("iterations", "keyLength", "passwordLength"))
    except (KeyError, ValueError, binascii.Error):
        raise PasswordEncoderError("not an encoded password") from None
    for candidate in (secret, old_secret):
        if candidate is None:
            continue
        decryptor = Cipher(algorithms.AES(_key(candidate, salt, iterations, key_length)), modes.CBC(iv)).decryptor()
        unpadder = padding.PKCS7(128).unpadder()
        try:
            plain = unpadder.update(decryptor.update(encrypted) + decryptor.finalize()) + unpadder.finalize()
            password = plain.decode()
        except ValueError:
            continue
        if len(password) == length:
            return password
    raise PasswordEncoderError("the encoded password does not decode with password.encoder.secret")


def _key(secret: str, salt: bytes, iterations: int, key_length: int) -> bytes:
    return hashlib.pbkdf2_hmac("sha512", secret.encode(), salt, iterations, dklen=key_length // 8)
