"""What ``warren api`` serves and runs: the ingest API (``ingest``), the admin API over the endpoint store
(``admin``), and the attempt log's writer beside them (``attempt_writer``); ``app`` puts them together and
``server`` runs them until a signal."""
