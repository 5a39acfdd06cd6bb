"""Every installed CRC-32C implementation agrees on the check vectors and on the CRCs of real batches."""

from __future__ import annotations

import os
from collections.abc import Callable

import pytest
from kafka.record.util import calc_crc32c
from records_support import MAGIC_CODECS, Sample, kafka_python_build, mq_build, sample_records

from mq.records import Codec, iter_headers
from mq.records.crc import CRC32C_IMPLEMENTATION, CRC32C_IMPLEMENTATIONS, crc32, crc32c

RANDOM = os.urandom(64 * 1024)
IMPLEMENTATIONS = sorted(CRC32C_IMPLEMENTATIONS)


def test_every_expected_implementation_is_installed() -> None:
    assert set(IMPLEMENTATIONS) == {"crc32c", "google-crc32c", "crcmod"}
    assert crc32c is CRC32C_IMPLEMENTATIONS[CRC32C_IMPLEMENTATION]


@pytest.mark.parametrize("name", IMPLEMENTATIONS)
def test_crc32c_vectors(name: str) -> None:
    fn = CRC32C_IMPLEMENTATIONS[name]
    assert fn(b"123456789") == 0xE3069283
    assert fn(b"") == 0
    reference = calc_crc32c(RANDOM)
    assert fn(RANDOM) == reference
    assert fn(memoryview(RANDOM)) == reference
    assert fn(bytearray(RANDOM)) == reference
    assert fn(memoryview(b"xx" + RANDOM)[2:]) == reference


@pytest.mark.parametrize("name", IMPLEMENTATIONS)
@pytest.mark.parametrize("build", [mq_build, kafka_python_build], ids=["mq", "kafka-python"])
def test_crc32c_of_real_batches(name: str, build: Callable[[int, Codec, list[Sample]], bytes]) -> None:
    fn = CRC32C_IMPLEMENTATIONS[name]
    for codec in Codec:
        data = build(2, codec, sample_records(20))
        [header] = iter_headers(data)
        assert fn(memoryview(data)[21:]) == header.crc


def test_crc32_vectors_and_legacy_messages() -> None:
    assert crc32(b"123456789") == 0xCBF43926
    assert crc32(b"") == 0
    for magic, codec in MAGIC_CODECS:
        if magic == 2:
            continue
        data = kafka_python_build(magic, codec, sample_records(5))
        for header in iter_headers(data):
            assert crc32(memoryview(data)[header.position + 16 : header.end_position]) == header.crc
