"""``mq transactions`` logic over an in-memory admin: Kafka's table layout, each subcommand's columns, the
find-hanging search and Kafka's error lines."""

from __future__ import annotations

import pytest

from mq.client.admin import AbortTransactionSpec, TransactionDescription, TransactionListing
from mq.errors import ErrorCode, KafkaError
from mq.tools import transactions as tool
from mq.tools.transactions import Table, TransactionsError
from mq.topic_partition import TopicPartition as TP
from tests.unit.tools.transaction_fakes import FakeTransactionAdmin, producer

NOW = 10_000_000
MINUTE = 60_000
T0, T1, U0 = TP("t", 0), TP("t", 1), TP("u", 0)
DEBUG = ". Enable debug logging for additional detail."


def description(transactional_id: str, *partitions: TP, start: int | None = NOW - 5000) -> TransactionDescription:
    return TransactionDescription(1, transactional_id, "Ongoing", 11, 4, 60000, start, frozenset(partitions))


def test_table_lines_pad_each_column_to_its_widest_cell_and_end_every_cell_with_a_tab() -> None:
    table = Table(("A", "LongHeader"), ((1, None), ("wide-cell", "x")))
    assert table.lines() == ["A        \tLongHeader\t", "1        \tNone      \t", "wide-cell\tx         \t"]
    assert Table(("A", "B"), ()).lines() == ["A\tB\t"]
    assert table.documents() == [{"A": 1, "LongHeader": None}, {"A": "wide-cell", "LongHeader": "x"}]


def test_list_rows_by_broker_with_the_duration_filter() -> None:
    admin = FakeTransactionAdmin(
        listings={2: [TransactionListing("b", 7, "Empty")], 1: [TransactionListing("a", 5, "Ongoing")]}
    )
    table = tool.list_transactions(admin, 3000)
    assert table.lines() == [
        "TransactionalId\tCoordinator\tProducerId\tTransactionState\t",
        "a              \t1          \t5         \tOngoing         \t",
        "b              \t2          \t7         \tEmpty           \t",
    ]
    assert admin.calls == [("list_transactions", ([], 3000))]
    tool.list_transactions(admin)
    assert admin.calls[-1] == ("list_transactions", ([], -1))


def test_list_failure_is_kafkas_line() -> None:
    admin = FakeTransactionAdmin(failures={"list_transactions": KafkaError("no coordinator")})
    with pytest.raises(TransactionsError) as failure:
        tool.list_transactions(admin)
    assert str(failure.value) == f"Failed to list transactions: no coordinator{DEBUG}"


def test_describe_shows_the_duration_since_the_start_and_the_partitions() -> None:
    admin = FakeTransactionAdmin(
        descriptions={"tx": description("tx", T1, U0, T0), "idle": description("idle", start=None)}
    )
    (row,) = tool.describe_transaction(admin, "tx", NOW).rows
    assert row == (1, "tx", 11, 4, "Ongoing", 60000, NOW - 5000, 5000, "t-0,t-1,u-0")
    idle = tool.describe_transaction(admin, "idle", NOW)
    assert idle.cells()[0][6:] == ["None", "None", ""]
    assert idle.lines()[0].split("\t")[:-1] == list(tool.DESCRIBE_HEADERS)
    with pytest.raises(TransactionsError) as failure:
        tool.describe_transaction(admin, "gone", NOW)
    assert str(failure.value) == (
        "Failed to describe transaction state of transactional-id `gone`: DescribeTransactions request for "
        f"transactionalId `gone` failed because the ID could not be found{DEBUG}"
    )


def test_describe_producers_columns_and_failures() -> None:
    admin = FakeTransactionAdmin(producers={T0: (producer(5, 1000, 42, None), producer(6, 2000))})
    table = tool.describe_producers(admin, T0, 2)
    assert table.cells() == [["5", "2", "-1", "7", "1000", "42"], ["6", "2", "3", "7", "2000", "None"]]
    assert admin.calls == [("describe_producers", ([T0], 2))]
    admin.failures["describe_producers"] = KafkaError("refused")
    with pytest.raises(
        TransactionsError, match=f"^Failed to describe producers for partition t-0 on leader: refused{DEBUG}$"
    ):
        tool.describe_producers(admin, T0)
    with pytest.raises(TransactionsError, match="^Failed to describe producers for partition t-0 on broker 2: "):
        tool.describe_producers(admin, T0, 2)


def test_abort_by_start_offset_looks_the_producer_up() -> None:
    admin = FakeTransactionAdmin(producers={T0: (producer(5, 1000, 40), producer(6, 1000, 42, None))})
    spec = tool.abort_spec(admin, T0, 42, None, None, None)
    assert spec == AbortTransactionSpec(T0, 6, 2, 0)
    tool.abort(admin, spec)
    assert admin.aborted == [spec]
    with pytest.raises(TransactionsError) as missing:
        tool.abort_spec(admin, T0, 41, None, None, None)
    assert str(missing.value) == "Could not find any open transactions starting at offset 41 on partition t-0"


def test_abort_by_producer_needs_every_epoch_and_raises_a_negative_coordinator_epoch_to_zero() -> None:
    admin = FakeTransactionAdmin()
    assert tool.abort_spec(admin, T0, None, 9, 3, -1) == AbortTransactionSpec(T0, 9, 3, 0)
    assert tool.abort_spec(admin, T0, None, 9, 3, 4) == AbortTransactionSpec(T0, 9, 3, 4)
    with pytest.raises(TransactionsError, match="^Missing required argument --producer-epoch$"):
        tool.abort_spec(admin, T0, None, 9, None, 4)
    with pytest.raises(TransactionsError, match="^Missing required argument --coordinator-epoch$"):
        tool.abort_spec(admin, T0, None, 9, 3, None)
    with pytest.raises(TransactionsError, match="^The transaction to abort must be identified either with"):
        tool.abort_spec(admin, T0, None, None, 3, 4)
    assert not admin.calls


def test_abort_failures_are_kafkas_lines() -> None:
    admin = FakeTransactionAdmin(failures={"describe_producers": KafkaError("gone")})
    with pytest.raises(TransactionsError, match=f"^Failed to validate producer state for partition t-0: gone{DEBUG}$"):
        tool.abort_spec(admin, T0, 42, None, None, None)
    admin.failures["abort_transaction"] = KafkaError("fenced")
    spec = AbortTransactionSpec(T0, 9, 3, 4)
    with pytest.raises(TransactionsError) as failure:
        tool.abort(admin, spec)
    assert str(failure.value) == (
        "Failed to abort transaction AbortTransactionSpec(topicPartition=t-0, producerId=9, producerEpoch=3, "
        f"coordinatorEpoch=4): fenced{DEBUG}"
    )


def hanging_admin() -> FakeTransactionAdmin:
    old = NOW - 20 * MINUTE
    return FakeTransactionAdmin(
        topics={"t": [(1, 2), (2, 3)], "u": [(1,)]},
        producers={
            T0: (
                producer(1, old, 100),  # no coordinator knows producer 1: hanging
                producer(2, old, 101),  # "ok" includes t-0: the coordinator completes it
                producer(3, old - MINUTE, 102, None),  # "other" does not include t-0: hanging
                producer(4, NOW - MINUTE, 103),  # younger than the timeout
                producer(5, old),  # no open transaction
            ),
            T1: (producer(8, old, 5),),  # not on broker 1
            U0: (producer(6, old, 7),),  # "gone" is unknown to its coordinator: hanging
        },
        listings={
            1: [TransactionListing("ok", 2, "Ongoing"), TransactionListing("other", 3, "Ongoing")],
            2: [TransactionListing("gone", 6, "Ongoing"), TransactionListing("busy", 4, "Ongoing")],
        },
        descriptions={"ok": description("ok", T0), "other": description("other", U0)},
    )


def test_find_hanging_on_a_broker() -> None:
    admin = hanging_admin()
    table = tool.find_hanging(admin, NOW, broker_id=1)
    assert table.rows == (
        ("t", 0, 1, 2, 3, 100, NOW - 20 * MINUTE, 20),
        ("t", 0, 3, 2, -1, 102, NOW - 21 * MINUTE, 21),
        ("u", 0, 6, 2, 3, 7, NOW - 20 * MINUTE, 20),
    )
    assert admin.calls == [
        ("list_topics", True),
        ("describe_topics", ["t", "u"]),
        ("describe_producers", ([T0, U0], 1)),
        ("list_transactions", ([1, 2, 3, 6], -1)),
        ("describe_transactions", ["ok", "other", "gone"]),
    ]
    assert (
        table.lines()[0]
        == "Topic\tPartition\tProducerId\tProducerEpoch\tCoordinatorEpoch\tStartOffset\tLastTimestamp\tDuration(min)\t"
    )


def test_find_hanging_scopes_and_timeout() -> None:
    admin = hanging_admin()
    assert [r[2] for r in tool.find_hanging(admin, NOW, topic="t", partition=1).rows] == [8]
    assert admin.calls[0] == ("describe_producers", ([T1], None))
    admin.calls.clear()
    assert [r[2] for r in tool.find_hanging(admin, NOW, topic="t", max_transaction_timeout_min=30).rows] == []
    assert admin.calls == [("describe_topics", ["t"]), ("describe_producers", ([T0, T1], None))]
    assert tool.find_hanging(admin, NOW, topic="t", max_transaction_timeout_min=30).lines() == [
        "\t".join(tool.HANGING_HEADERS) + "\t"
    ]


def test_find_hanging_usage_and_failures() -> None:
    admin = hanging_admin()
    with pytest.raises(TransactionsError, match="^The `find-hanging` command requires either --topic or --broker-id"):
        tool.find_hanging(admin, NOW)
    with pytest.raises(TransactionsError, match="^The --partition argument requires --topic to be provided$"):
        tool.find_hanging(admin, NOW, broker_id=1, partition=0)
    assert not admin.calls
    admin.failures["describe_producers"] = KafkaError("down")
    with pytest.raises(
        TransactionsError, match=r"^Failed to describe producers for 2 partitions on broker Optional\[1\]: down"
    ):
        tool.find_hanging(admin, NOW, broker_id=1)
    with pytest.raises(
        TransactionsError, match="^Failed to describe producers for 2 partitions on broker Optional.empty"
    ):
        tool.find_hanging(admin, NOW, topic="t")
    del admin.failures["describe_producers"]
    admin.failures["list_transactions"] = KafkaError("down")
    with pytest.raises(TransactionsError, match="^Failed to list transactions for 4 producers: down"):
        tool.find_hanging(admin, NOW, broker_id=1)
    del admin.failures["list_transactions"]
    admin.descriptions["ok"] = KafkaError("denied", ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    with pytest.raises(TransactionsError, match="^Failed to describe 3 transactions: denied"):
        tool.find_hanging(admin, NOW, broker_id=1)


def test_find_hanging_describes_producers_500_partitions_at_a_time() -> None:
    admin = FakeTransactionAdmin(topics={"big": [(1,)] * 501})
    assert tool.find_hanging(admin, NOW, topic="big").rows == ()
    assert [len(a[0]) for n, a in admin.calls if n == "describe_producers"] == [500, 1]
    assert [n for n, _ in admin.calls].count("list_transactions") == 0
