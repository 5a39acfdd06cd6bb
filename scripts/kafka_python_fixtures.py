"""kafka-python's integration fixtures (``test/integration/fixtures.py``) served by mq brokers.

``scripts/kafka_python_suite.py`` puts this file in place of kafka-python's own fixtures module, which downloads and
starts Kafka. It keeps that module's interface (``KafkaFixture``, ``ZookeeperFixture``, ``create_topics``,
``client_params``) and its broker settings, and starts instead:

- ``$MQ_COMMAND server start`` (default ``python -m mq``) with the settings as ``--override`` keys, in ZooKeeper
  mode on its own chroot of a ZooKeeper from the Debian package, as kafka-python starts Kafka before 4.0; or
  standalone (no ``zookeeper.connect``) when ``MQ_STANDALONE=1``;
- SASL listeners with the fixture's user (``alice``): PLAIN users from the listener's JAAS config, SCRAM users made
  with ``mq configs``: on ZooKeeper before the broker starts, or (standalone, where the tree lives in the broker)
  through a second, PLAINTEXT listener on 127.0.0.1 once it listens;
- SSL listeners with PEM certificates from ``mq.tools.certs`` (``ssl_dir/ca-cert`` is the CA, as the tests read it);
- topics made with ``KafkaAdminClient`` and listed with ``mq topics --list``.
"""

import atexit
import logging
import os
import shlex
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

from client_suite import START_TIMEOUT, LoggedProcess
from client_suite import free_port as get_open_port
from kafka import KafkaAdminClient
from kafka.errors import InvalidReplicationFactorError
from test.testutil import env_kafka_version, random_string

log = logging.getLogger(__name__)

MQ_COMMAND = shlex.split(os.environ.get("MQ_COMMAND") or f"{shlex.quote(sys.executable)} -m mq")
ZOOKEEPER_JAR = Path(os.environ.get("ZOOKEEPER_JAR", "/usr/share/java/zookeeper.jar"))


def create_topics(broker, topic_names, num_partitions=None, replication_factor=None):
    """Create topics with the admin client and wait until the broker's metadata has them."""
    topics = {
        name: {
            "num_partitions": broker.partitions if num_partitions is None else num_partitions,
            "replication_factor": broker.replicas if replication_factor is None else replication_factor,
        }
        for name in topic_names
    }
    params = broker._enrich_client_params({"api_version": env_kafka_version(), "client_id": "topic_creator"})
    with KafkaAdminClient(**params) as admin:
        try:
            admin.create_topics(topics, wait_for_metadata=True)
        except InvalidReplicationFactorError:  # a broker not yet registered in its own metadata
            time.sleep(0.5)
            admin.create_topics(topics, wait_for_metadata=True)


def client_params(broker, client_id="client", **overrides):
    """Connection params for a client of ``broker``."""
    return broker._enrich_client_params(overrides, client_id=f"{client_id}_{random_string(4)}")


class ExternalProcess:
    """A service started elsewhere (``KAFKA_URI`` / ``ZOOKEEPER_URI``)."""

    def dump_logs(self):
        pass

    def stop(self):
        pass


class ZookeeperFixture:
    """A standalone ZooKeeper from the Debian package on a free loopback port."""

    @classmethod
    def instance(cls, host=None, port=None, external=False):
        fixture = cls(host or "127.0.0.1", port, external=external)
        try:
            fixture.open()
        except BaseException:
            fixture.close()
            raise
        return fixture

    def __init__(self, host, port, external=False, tmp_dir=None):
        self.host = host
        self.port = port
        self.external = external
        self.tmp_dir = Path(tmp_dir) if tmp_dir else None
        self.child = ExternalProcess() if external else None

    def open(self):
        if self.child is not None:
            return
        if not ZOOKEEPER_JAR.exists():
            raise RuntimeError(f"ZooKeeper is not installed ({ZOOKEEPER_JAR}): apt-get install zookeeper")
        self.tmp_dir = self.tmp_dir or Path(tempfile.mkdtemp(prefix="zookeeper-"))
        self.port = self.port or get_open_port()
        config = self.tmp_dir / "zoo.cfg"
        config.write_text(
            f"tickTime=500\ndataDir={self.tmp_dir}/data\nclientPort={self.port}\nclientPortAddress={self.host}\n"
            "maxClientCnxns=0\nadmin.enableServer=false\n4lw.commands.whitelist=*\nforceSync=no\n",
            encoding="utf-8",
        )
        classpath = f"{ZOOKEEPER_JAR}:/usr/share/java/slf4j-simple.jar"
        args = [
            "java",
            "-Xmx256m",
            "-XX:+UseSerialGC",
            "-cp",
            classpath,
            "org.apache.zookeeper.server.ZooKeeperServerMain",
        ]
        self.child = LoggedProcess([*args, str(config)], self.tmp_dir / "zookeeper.log")
        atexit.register(self.close)
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            if not self.child.running():
                raise RuntimeError(f"ZooKeeper exited:\n{self.child.output()}")
            try:
                with socket.create_connection((self.host, self.port), timeout=0.5) as sock:
                    sock.sendall(b"srvr")
                    if b"Mode:" in sock.recv(1024):
                        return
            except OSError:
                pass
            time.sleep(0.1)
        raise RuntimeError(f"ZooKeeper did not start:\n{self.child.output()}")

    def dump_logs(self):
        if self.child is not None:
            self.child.dump_logs()

    def close(self):
        if self.child is not None:
            self.child.stop()
            self.child = None
        if self.tmp_dir is not None and not self.external:
            shutil.rmtree(self.tmp_dir, ignore_errors=True)
            self.tmp_dir = None


class KafkaFixture:
    """One mq broker with kafka-python's fixture settings (``partitions``, ``replicas``, ``transport``, ...)."""

    broker_user = "alice"
    broker_password = "alice-secret"

    @classmethod
    def instance(
        cls,
        broker_id,
        zookeeper=None,
        zk_chroot=None,
        host="localhost",
        port=None,
        external=False,
        transport="PLAINTEXT",
        replicas=1,
        partitions=4,
        sasl_mechanism=None,
        auto_create_topic=True,
        tmp_dir=None,
    ):
        if zookeeper is None and not external and os.environ.get("MQ_STANDALONE") != "1":
            zookeeper = ZookeeperFixture.instance()
        if zookeeper is not None and zk_chroot is None:
            zk_chroot = "kafka-python_" + uuid.uuid4().hex
        fixture = cls(
            host,
            port,
            broker_id,
            zookeeper=zookeeper,
            zk_chroot=zk_chroot,
            external=external,
            transport=transport,
            replicas=replicas,
            partitions=partitions,
            sasl_mechanism=sasl_mechanism,
            auto_create_topic=auto_create_topic,
            tmp_dir=tmp_dir,
        )
        try:
            fixture.open()
        except BaseException:
            fixture.close()
            raise
        return fixture

    def __init__(
        self,
        host,
        port,
        broker_id,
        zookeeper=None,
        zk_chroot=None,
        replicas=1,
        partitions=2,
        transport="PLAINTEXT",
        sasl_mechanism=None,
        auto_create_topic=True,
        tmp_dir=None,
        external=False,
    ):
        self.host = host
        self.auto_port = port is None
        self.port = port or get_open_port()
        self.broker_id = broker_id
        self.zookeeper = zookeeper
        self.zk_chroot = zk_chroot
        self.external = external
        self.transport = transport.upper()
        self.sasl_mechanism = sasl_mechanism.upper() if sasl_mechanism else None
        assert (self.sasl_mechanism is not None) == self.sasl_enabled, "SASL transport requires sasl_mechanism"
        self.replicas = replicas
        self.partitions = partitions
        self.auto_create_topic = auto_create_topic
        self.tmp_dir = tmp_dir
        self.ssl_dir = None
        self._plaintext_port = None
        self.running = external
        self.child = ExternalProcess() if external else None

    @property
    def sasl_enabled(self):
        return self.transport in ("SASL_PLAINTEXT", "SASL_SSL")

    @property
    def ssl_enabled(self):
        return self.transport in ("SSL", "SASL_SSL")

    @property
    def _dir(self):
        return Path(str(self.tmp_dir))

    def bootstrap_server(self):
        return f"{self.host}:{self.port}"

    def out(self, message):
        log.info("*** mq [%s:%s]: %s", self.host, self.port, message)

    def _zookeeper_connect(self):
        return f"{self.zookeeper.host}:{self.zookeeper.port}/{self.zk_chroot}"

    def _overrides(self):
        """The broker settings of kafka-python's kafka.properties template, as mq keys."""
        listeners = f"{self.transport}://{self.host}:{self.port}"
        if self._setup_port is not None:
            listeners += f",PLAINTEXT://127.0.0.1:{self._setup_port}"
        overrides = {
            "broker.id": self.broker_id,
            "listeners": listeners,
            "security.inter.broker.protocol": self.transport,
            "log.dirs": self._dir / "data",
            "num.partitions": self.partitions,
            "default.replication.factor": self.replicas,
            "auto.create.topics.enable": str(self.auto_create_topic).lower(),
            "replica.lag.time.max.ms": 1000,
            "offsets.topic.replication.factor": 1,
            "offsets.topic.num.partitions": 2,
            "offsets.commit.timeout.ms": 500,
            "transaction.state.log.replication.factor": 1,
            "transaction.state.log.min.isr": 1,
            "log.cleaner.enable": "false",
            "group.min.session.timeout.ms": 1000,
            "group.initial.rebalance.delay.ms": 0,
            "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
            "allow.everyone.if.no.acl.found": "true",
        }
        if self.zookeeper is not None:
            overrides["zookeeper.connect"] = self._zookeeper_connect()
            overrides["zookeeper.session.timeout.ms"] = 6000
        if self.sasl_enabled:
            mechanism = self.sasl_mechanism
            overrides["sasl.enabled.mechanisms"] = mechanism
            overrides["sasl.mechanism.inter.broker.protocol"] = mechanism
            overrides[f"listener.name.{self.transport.lower()}.{mechanism.lower()}.sasl.jaas.config"] = self._jaas()
        if self.ssl_enabled:
            keystore = self._make_certificates()
            overrides["ssl.keystore.type"] = "PEM"
            overrides["ssl.keystore.location"] = keystore
            overrides["ssl.truststore.type"] = "PEM"
            overrides["ssl.truststore.location"] = Path(self.ssl_dir) / "ca-cert"
        return overrides

    def _jaas(self):
        user, password = self.broker_user, self.broker_password
        if self.sasl_mechanism == "PLAIN":
            module = "org.apache.kafka.common.security.plain.PlainLoginModule"
            return f'{module} required username="{user}" password="{password}" user_{user}="{password}";'
        if self.sasl_mechanism in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
            module = "org.apache.kafka.common.security.scram.ScramLoginModule"
            return f'{module} required username="{user}" password="{password}";'
        raise ValueError(f"SASL mechanism {self.sasl_mechanism} is not supported")

    def _make_certificates(self):
        """A CA and a broker certificate for localhost: ``ssl_dir/ca-cert`` and a PEM keystore (certificate + key)."""
        from mq.tools.certs import make_certs

        self.ssl_dir = str(self._dir / "ssl")
        certs = make_certs(Path(self.ssl_dir))
        shutil.copyfile(certs.ca, Path(self.ssl_dir) / "ca-cert")
        keystore = Path(self.ssl_dir) / "broker.both.pem"
        keystore.write_bytes(certs.broker.certificate.read_bytes() + certs.broker.key.read_bytes())
        return keystore

    def _mq(self, *args):
        result = subprocess.run([*MQ_COMMAND, *args], capture_output=True, text=True, timeout=120)
        if result.returncode != 0:
            raise RuntimeError(f"mq {' '.join(args)} failed:\n{result.stdout}{result.stderr}")
        return result.stdout

    def _add_scram_user(self, *connect):
        credential = f"{self.sasl_mechanism}=[password={self.broker_password}]"
        user = ["--entity-type", "users", "--entity-name", self.broker_user]
        self._mq("configs", *connect, "--alter", *user, "--add-config", credential)

    @property
    def _scram(self):
        return self.sasl_enabled and self.sasl_mechanism.startswith("SCRAM-SHA-")

    def open(self):
        if self.running:
            return
        if self.tmp_dir is None:
            self.tmp_dir = tempfile.mkdtemp(prefix="mq-kafka-python-")
        (self._dir / "logs").mkdir(parents=True, exist_ok=True)
        if self._scram and self.zookeeper is not None:
            self._add_scram_user("--zookeeper", self._zookeeper_connect())
        atexit.register(self.close)
        self.start()

    def start(self):
        if self.running:
            return
        if self.auto_port:
            self.port = get_open_port()
        args = [*MQ_COMMAND, "server", "start"]
        for key, value in self._overrides().items():
            args += ["--override", f"{key}={value}"]
        self.out(f"starting: {shlex.join(args)}")
        self.child = LoggedProcess.listening_on(args, self._dir / "logs" / "server.out", self.host, self.port)
        if self._setup_port is not None:
            self._add_scram_user("--bootstrap-server", f"127.0.0.1:{self._setup_port}")
        self.running = True

    @property
    def _setup_port(self):
        """The PLAINTEXT port on which a standalone broker gets its SCRAM user, else None."""
        if self._scram and self.zookeeper is None:
            if self._plaintext_port is None:
                self._plaintext_port = get_open_port()
            return self._plaintext_port
        return None

    def _command_config(self):
        """``--bootstrap-server`` (and ``--command-config`` for SASL) for mq's tools."""
        args = ["--bootstrap-server", self.bootstrap_server()]
        if self.sasl_enabled:
            config = self._dir / "sasl_command.conf"
            config.write_text(
                f"security.protocol={self.transport}\nsasl.mechanism={self.sasl_mechanism}\n"
                f"sasl.jaas.config={self._jaas()}\n",
                encoding="utf-8",
            )
            args += ["--command-config", str(config)]
        return args

    def get_topic_names(self):
        return self._mq("topics", "--list", *self._command_config()).splitlines()

    def _enrich_client_params(self, params, **defaults):
        params = dict(params)
        for key, value in defaults.items():
            params.setdefault(key, value)
        params.setdefault("bootstrap_servers", self.bootstrap_server())
        params.setdefault("security_protocol", self.transport)
        if self.sasl_enabled:
            params.setdefault("sasl_mechanism", self.sasl_mechanism)
            params.setdefault("sasl_plain_username", self.broker_user)
            params.setdefault("sasl_plain_password", self.broker_password)
        if self.ssl_enabled:
            params.setdefault("ssl_cafile", os.path.join(self.ssl_dir, "ca-cert"))
            params.setdefault("ssl_check_hostname", False)
        return params

    def dump_logs(self):
        if self.child is not None:
            self.child.dump_logs()
        if self.zookeeper is not None:
            self.zookeeper.dump_logs()

    def stop(self):
        if self.external or not self.running:
            return
        self.child.stop()
        self.running = False

    def close(self):
        self.stop()
        if self.tmp_dir is not None and not self.external:
            shutil.rmtree(str(self.tmp_dir), ignore_errors=True)
            self.tmp_dir = None
