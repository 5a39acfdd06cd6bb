"""Security pieces without I/O: JAAS options, SASL mechanisms' messages, principals, ACLs and their matching."""
