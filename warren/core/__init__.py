"""The ground every home stands on, with no knowledge of RabbitMQ, HTTP endpoints or SQL.

The error tree (``errors``: ``WarrenError`` and every error Warren raises), bounded waits (``deadlines``), strict
JSON (``strict_json``: duplicate keys refused at any depth), strict records (``strict_records``: the records
Warren's processes hand each other through RabbitMQ, read through pydantic with no lax conversions), and the
small readers and writers of text from outside (``digits``, ``moments``, ``visible``, ``redact``, ``line_stream``).
"""
