"""``mq export-zk-offsets``: Kafka's ExportZkOffsets, the committed offsets of ZooKeeper-coordinated groups as lines.

One line per partition with an offset: the znode path, a colon, the offset (``/consumers/g/offsets/t/0:42``), groups,
topics and partitions sorted; without groups, every child of ``/consumers``. ``mq import-zk-offsets`` reads them back.
"""

from __future__ import annotations

from collections.abc import Sequence

from mq.zk import paths
from mq.zk.consumer_groups import ZkConsumerGroups


def export_lines(groups: ZkConsumerGroups, group_ids: Sequence[str] = ()) -> list[str]:
    lines = []
    for group in sorted(set(group_ids)) if group_ids else groups.groups():
        for tp, offset in groups.offsets(group).items():
            lines.append(f"{paths.consumer_offset(group, tp.topic, tp.partition)}:{offset}")
    return lines
