"""mq's own Kafka client: asyncio core (connection, cluster, admin, producer, consumer) and a synchronous facade."""
