"""``python -m mq`` runs the ``mq`` command."""

from mq.cli.main import main

main()
