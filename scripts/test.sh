#!/usr/bin/env bash
# Installs what the tests need into the current Python (compiling the modules of mq/compiled.py), checks lint,
# format and types, then runs the tests. Extra arguments go to pytest (e.g. `scripts/test.sh tests/unit -x`).
set -euo pipefail
cd "$(dirname "$0")/.."

python3 -m pip install --quiet --disable-pip-version-check -e '.[test]'

# Debian packages the integration tests drive: kcat (a librdkafka client), ZooKeeper, and Java 17 for PySpark.
missing=()
command -v kcat >/dev/null 2>&1 || missing+=(kcat)
[ -f /usr/share/java/zookeeper.jar ] || missing+=(zookeeper)
command -v java >/dev/null 2>&1 || missing+=(openjdk-17-jre-headless)
if [ ${#missing[@]} -gt 0 ]; then
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi

python3 -m ruff check .
python3 -m ruff format --check .
python3 -m mypy
python3 -m pytest -n 3 --dist loadfile --durations=25 "$@"

# A whole run tests the modules the build compiled (mq/compiled.py) once more from their source: the pure-Python
# fallback of an install without a C compiler.
if [ $# -eq 0 ]; then
  MQ_PURE_PYTHON=1 python3 -m pytest -n 3 --dist loadfile tests/unit/records tests/unit/protocol tests/unit/storage \
    tests/unit/test_compiled.py tests/component/test_fuzz_requests.py
fi
