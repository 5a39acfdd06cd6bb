#!/usr/bin/env bash
# Local development cluster: one ZooKeeper (Debian package) and N mq brokers on 127.0.0.1.
#
#   scripts/cluster.sh start N [--base-dir DIR] [--port P] [--zookeeper-port P] [--override k=v]
#   scripts/cluster.sh status [N] [--base-dir DIR]
#   scripts/cluster.sh stop [N] [--base-dir DIR]
#
# start waits until every broker is registered in ZooKeeper and knows the whole cluster, then prints the bootstrap
# servers line on stdout (progress goes to stderr), so BOOTSTRAP=$(scripts/cluster.sh start 3) works. Data, logs and process ids live
# under DIR (default ./mq-cluster). The Python that runs it is $MQ_PYTHON, else python3 (mq must be installed in it).
set -euo pipefail
exec "${MQ_PYTHON:-python3}" -m mq.tools.local_cluster "$@"
