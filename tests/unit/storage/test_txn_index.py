"""The transaction index: Kafka's 34-byte entries, lookups over a fetch range, truncation and a torn last entry."""

from __future__ import annotations

from pathlib import Path

import pytest

from mq.errors import CorruptIndexError
from mq.storage.file_names import txn_index_file_name
from mq.storage.txn_index import ABORTED_TXN_SIZE, AbortedTxn, TransactionIndex, iter_aborted_txns

TXNS = [AbortedTxn(0, 0, 10, 11), AbortedTxn(1, 5, 15, 13), AbortedTxn(2, 18, 35, 25), AbortedTxn(3, 32, 50, 40)]


def index_with(path: Path, txns: list[AbortedTxn], base_offset: int = 0) -> TransactionIndex:
    index = TransactionIndex(path, base_offset)
    for txn in txns:
        index.append(txn)
    return index


def test_entry_bytes() -> None:
    txn = AbortedTxn(producer_id=0x0102030405060708, first_offset=1, last_offset=2, last_stable_offset=3)
    expected = bytes.fromhex("00000102030405060708000000000000000100000000000000020000000000000003")
    assert txn.encode() == expected
    assert ABORTED_TXN_SIZE == 34
    assert list(iter_aborted_txns(expected)) == [txn]


def test_appends_are_written_and_reopened(tmp_path: Path) -> None:
    path = txn_index_file_name(tmp_path, 0)
    assert path.name == "00000000000000000000.txnindex"
    index = TransactionIndex(path, 0)
    assert not path.exists(), "the file is created by the first append"
    for txn in TXNS:
        index.append(txn)
    index.flush()
    assert path.read_bytes() == b"".join(txn.encode() for txn in TXNS)
    assert TransactionIndex(path, 0).entries == TXNS


def test_last_offsets_must_increase(tmp_path: Path) -> None:
    index = index_with(tmp_path / "0.txnindex", TXNS[:2])
    with pytest.raises(ValueError, match="must increase sequentially"):
        index.append(AbortedTxn(9, 1, 15, 16))
    reopened = TransactionIndex(tmp_path / "0.txnindex", 0)
    with pytest.raises(ValueError):
        reopened.append(AbortedTxn(9, 1, 12, 16))
    reopened.append(AbortedTxn(9, 1, 16, 17))


@pytest.mark.parametrize(
    ("fetch_offset", "upper_bound", "expected", "complete"),
    [
        (0, 32, TXNS[:3], True),  # the fourth starts at the bound; its LSO ends the search
        (0, 33, TXNS, True),
        (11, 16, [TXNS[1]], True),  # the first ended before the fetch; the third starts after it
        (16, 18, [], True),  # the third starts at the bound
        (16, 19, [TXNS[2]], True),
        (51, 60, [], False),  # all before the range: later segments may still hold some
        (0, 100, TXNS, False),
    ],
)
def test_collect_aborted(
    tmp_path: Path, fetch_offset: int, upper_bound: int, expected: list[AbortedTxn], complete: bool
) -> None:
    result = index_with(tmp_path / "0.txnindex", TXNS).collect_aborted(fetch_offset, upper_bound)
    assert result.aborted == expected
    assert result.complete == complete


def test_truncate_to(tmp_path: Path) -> None:
    path = tmp_path / "0.txnindex"
    index = index_with(path, TXNS)
    index.truncate_to(35)
    assert index.entries == TXNS[:2]
    assert path.stat().st_size == 2 * ABORTED_TXN_SIZE
    assert index.last_offset == 15
    index.append(AbortedTxn(7, 20, 30, 31))
    assert TransactionIndex(path, 0).entries == [*TXNS[:2], AbortedTxn(7, 20, 30, 31)]
    index.truncate_to(100)
    assert len(index.entries) == 3
    index.reset()
    assert index.entries == [] and path.stat().st_size == 0


def test_a_torn_last_entry_is_ignored_and_cut_off(tmp_path: Path) -> None:
    path = tmp_path / "0.txnindex"
    path.write_bytes(TXNS[0].encode() + TXNS[1].encode()[:20])
    assert list(iter_aborted_txns(path.read_bytes())) == [TXNS[0]]
    index = TransactionIndex(path, 0)
    assert index.entries == [TXNS[0]]
    assert path.stat().st_size == ABORTED_TXN_SIZE
    index.append(TXNS[1])
    assert TransactionIndex(path, 0).entries == TXNS[:2]


def test_unknown_version_and_sanity_check(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000000020.txnindex"
    path.write_bytes(AbortedTxn(1, 2, 3, 4, version=1).encode())
    with pytest.raises(CorruptIndexError, match="Unexpected aborted transaction version 1"):
        TransactionIndex(path, 20)
    path.write_bytes(AbortedTxn(1, 2, 30, 31).encode() + AbortedTxn(1, 2, 10, 31).encode())
    with pytest.raises(CorruptIndexError, match="is less than start offset 20"):
        TransactionIndex(path, 20).sanity_check()
    TransactionIndex(path, 10).sanity_check()
