"""The reference byte examples (value "hello", null key, offset 0, timestamp 1500000000000) in each format."""

from __future__ import annotations

TS = 1500000000000
V0_HELLO = bytes.fromhex("00000000000000000000001387a77ab20000ffffffff0000000568656c6c6f")
V1_HELLO = bytes.fromhex("00000000000000000000001bca1882f401000000015d3ef79800ffffffff0000000568656c6c6f")
V2_HELLO = bytes.fromhex(
    "0000000000000000"  # baseOffset
    "0000003d"  # batchLength 61
    "00000000"  # partitionLeaderEpoch 0
    "02"  # magic
    "901ca2dd"  # crc32c 2417795805
    "0000"  # attributes
    "00000000"  # lastOffsetDelta
    "0000015d3ef79800"  # baseTimestamp
    "0000015d3ef79800"  # maxTimestamp
    "ffffffffffffffff"  # producerId
    "ffff"  # producerEpoch
    "ffffffff"  # baseSequence
    "00000001"  # recordsCount
    "16000000010a68656c6c6f00"  # the record
)
