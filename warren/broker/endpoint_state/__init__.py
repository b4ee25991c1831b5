"""Endpoint states shared through RabbitMQ: the records (circuit, pause, disable), the state stream that remembers
them, the operator events, and the admin changes (``warren endpoint pause``, the admin API) that write them."""
