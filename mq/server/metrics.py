"""The broker's metrics: plain recorders on the hot path, one Prometheus collector that reads everything at scrape time.

Components own their recorders and count per request or per batch, never per record: the network layer times
every request (``RequestStats``, only while ``metrics.listener`` is set), the replica manager counts appends and
fetches per topic (``BrokerTopicStats``), the controller and the log flushes time themselves (``Timer``). Gauges
(partition counts, log offsets, purgatory sizes, connections, consumer lag) are not recorded at all: the collector
reads them from the broker's state when scraped. The scrape runs on the event loop (``mq.server.metrics_http``), so
it reads loop-owned state without locks; nothing here mutates broker state.

Names follow what Strimzi's JMX exporter rules (``kafka-metrics.yaml``) make of Kafka's MBeans: lower case,
``PerSec`` dropped, meters as counters ``_total``, gauges by their name, histograms and timers as summaries (a gauge
per quantile with ``quantile`` = "0.50", "0.75", "0.95", "0.98", "0.99", "0.999", plus ``_count`` and ``_sum``;
quantiles over the last one to two minutes, count and sum since start). Topic metrics come once per topic (label
``topic``) and once for all topics (no label).

=====================================================================  ========  ===========================================
name                                                                   type      labels
=====================================================================  ========  ===========================================
kafka_server_brokertopicmetrics_messagesin_total                       counter   [topic]
kafka_server_brokertopicmetrics_bytesin_total                          counter   [topic]
kafka_server_brokertopicmetrics_bytesout_total                         counter   [topic]
kafka_server_brokertopicmetrics_bytesrejected_total                    counter   [topic]
kafka_server_brokertopicmetrics_failedproducerequests_total            counter   [topic]
kafka_server_brokertopicmetrics_failedfetchrequests_total              counter   [topic]
kafka_server_brokertopicmetrics_totalproducerequests_total             counter   [topic]
kafka_server_brokertopicmetrics_totalfetchrequests_total               counter   [topic]
kafka_network_requestmetrics_requests_total                            counter   request, version
kafka_network_requestmetrics_totaltimems                               summary   request (+ quantile)
kafka_network_requestmetrics_requestqueuetimems                        summary   request (+ quantile)
kafka_network_requestmetrics_localtimems                               summary   request (+ quantile)
kafka_network_requestmetrics_remotetimems                              summary   request (+ quantile)
kafka_network_requestmetrics_responsesendtimems                        summary   request (+ quantile)
kafka_server_replicamanager_underreplicatedpartitions                  gauge
kafka_server_replicamanager_underminisrpartitioncount                  gauge
kafka_server_replicamanager_partitioncount                             gauge
kafka_server_replicamanager_leadercount                                gauge
kafka_server_replicamanager_offlinereplicacount                        gauge
kafka_server_replicamanager_isrshrinks_total                           counter
kafka_server_replicamanager_isrexpands_total                           counter
kafka_server_replicafetchermanager_maxlag                              gauge     clientId="Replica"
kafka_controller_kafkacontroller_activecontrollercount                 gauge
kafka_controller_kafkacontroller_offlinepartitionscount                gauge     (0 unless active controller)
kafka_controller_kafkacontroller_globaltopiccount                      gauge     (0 unless active controller)
kafka_controller_kafkacontroller_globalpartitioncount                  gauge     (0 unless active controller)
kafka_controller_controllerstats_leaderelectionrateandtimems           summary   (+ quantile)
kafka_controller_controllerstats_uncleanleaderelections_total          counter
kafka_log_logflushstats_logflushrateandtimems                          summary   (+ quantile)
kafka_log_log_logstartoffset                                           gauge     topic, partition
kafka_log_log_logendoffset                                             gauge     topic, partition
kafka_log_log_size                                                     gauge     topic, partition
kafka_log_log_numlogsegments                                           gauge     topic, partition
kafka_server_delayedoperationpurgatory_purgatorysize                   gauge     delayedOperation (Produce, Fetch)
kafka_server_socket_server_metrics_connection_count                    gauge     listener, networkProcessor="0"
kafka_server_socket_server_metrics_connections_software                gauge     clientSoftwareName, clientSoftwareVersion,
                                                                                 listener, networkProcessor="0"
kafka_network_socketserver_networkprocessoravgidle_percent             gauge     (a fraction 0..1, as Kafka's)
kafka_server_kafkaserver_brokerstate                                   gauge     (3 running, 7 shutting down)
kafka_server_quota_throttle_time_ms_total                              counter   quota (produce, fetch, request)
kafka_log_logcleaner_cleaner_runs_total                                counter
kafka_log_logcleaner_max_clean_time_secs                               gauge
kafka_log_logcleaner_cleaner_recopy_percent                            gauge
kafka_log_logcleanermanager_uncleanable_partitions_count               gauge
kafka_consumergroup_current_offset                                     gauge     consumergroup, topic, partition
kafka_consumergroup_lag                                                gauge     consumergroup, topic, partition
kafka_consumergroup_lag_seconds                                        gauge     consumergroup, topic, partition
process_cpu_seconds_total, process_resident_memory_bytes,              (prometheus-client's process collector)
process_virtual_memory_bytes, process_open_fds, process_max_fds,
process_start_time_seconds
=====================================================================  ========  ===========================================

Beyond Kafka: consumer lag (kafka_exporter's names: committed offset, high watermark minus it, and the age of the
oldest unconsumed record as ``mq consumer-groups`` computes LAG-SECONDS) and the software of connected clients
(ApiVersions v3's client_software_name/version; Kafka's own metric, under Strimzi's name for it).
"""
