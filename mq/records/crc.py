"""Checksums of Kafka's record formats.

* CRC-32 (IEEE, as ``java.util.zip.CRC32``) covers a v0/v1 message from its magic byte to the end.
* CRC-32C (Castagnoli) covers a v2 batch from its attributes field (byte 21) to the end, and producer snapshots.

``crc32c`` is the fastest implementation installed: the hardware-accelerated ``crc32c`` or ``google-crc32c`` wheel,
else crcmod's C extension. ``CRC32C_IMPLEMENTATIONS`` lists every one that is available so all can be checked
against the same vectors.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable
from typing import Any

Buffer = bytes | bytearray | memoryview
CrcFunction = Callable[[Buffer], int]


def crc32(data: Buffer) -> int:
    """CRC-32 (IEEE) of ``data`` as an unsigned 32-bit integer."""
    return zlib.crc32(data) & 0xFFFFFFFF


def _hardware_crc32c() -> CrcFunction | None:
    try:
        import crc32c as mod
    except ImportError:
        return None
    fn: Callable[[Any], int] = mod.crc32c
    return fn


def _google_crc32c() -> CrcFunction | None:
    try:
        import google_crc32c as mod
    except ImportError:
        return None
    value: Callable[[bytes], int] = mod.value

    def fn(data: Buffer) -> int:
        return value(bytes(data) if not isinstance(data, bytes) else data)

    return fn


def _crcmod_crc32c() -> CrcFunction | None:
    try:
        import crcmod.predefined
    except ImportError:
        return None
    mk: Callable[[str], Callable[[Any], int]] = crcmod.predefined.mkCrcFun
    raw = mk("crc-32c")

    def fn(data: Buffer) -> int:
        return raw(bytes(data) if isinstance(data, memoryview) else data)

    return fn


def _available() -> dict[str, CrcFunction]:
    found: dict[str, CrcFunction] = {}
    for name, factory in (("crc32c", _hardware_crc32c), ("google-crc32c", _google_crc32c), ("crcmod", _crcmod_crc32c)):
        fn = factory()
        if fn is not None:
            found[name] = fn
    if not found:
        raise ImportError("no CRC-32C implementation: install crc32c, google-crc32c or crcmod")
    return found


CRC32C_IMPLEMENTATIONS: dict[str, CrcFunction] = _available()
CRC32C_IMPLEMENTATION: str = next(iter(CRC32C_IMPLEMENTATIONS))
crc32c: CrcFunction = CRC32C_IMPLEMENTATIONS[CRC32C_IMPLEMENTATION]
