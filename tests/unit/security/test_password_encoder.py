"""Secrets of dynamic broker configs encrypted as Kafka stores them (``password.encoder.secret``)."""

from __future__ import annotations

import pytest

from mq.security.password_encoder import PasswordEncoderError, decode, encode


def test_a_secret_round_trips_in_kafkas_fields_and_never_in_clear() -> None:
    stored = encode("keystore-pässword", "encoder-secret")
    fields = dict(part.partition(":")[::2] for part in stored.split(","))
    assert set(fields) == {
        "keyFactoryAlgorithm",
        "cipherAlgorithm",
        "keyLength",
        "salt",
        "iterations",
        "encryptedPassword",
        "passwordLength",
        "initializationVector",
    }
    assert (
        fields["keyFactoryAlgorithm"] == "PBKDF2WithHmacSHA512" and fields["cipherAlgorithm"] == "AES/CBC/PKCS5Padding"
    )
    assert fields["passwordLength"] == str(len("keystore-pässword"))
    assert "keystore" not in stored
    assert decode(stored, "encoder-secret") == "keystore-pässword"
    assert encode("same", "encoder-secret") != encode("same", "encoder-secret")  # a new salt and IV each time


def test_the_old_secret_reads_what_it_encrypted_and_a_wrong_secret_reads_nothing() -> None:
    stored = encode("p", "old")
    assert decode(stored, "new", old_secret="old") == "p"
    with pytest.raises(PasswordEncoderError, match="does not decode"):
        decode(stored, "wrong")


@pytest.mark.parametrize("stored", ["", "plain-text", "keyFactoryAlgorithm:PBKDF2WithHmacSHA512"])
def test_a_value_that_is_not_encoded_is_refused(stored: str) -> None:
    with pytest.raises(PasswordEncoderError):
        decode(stored, "secret")
