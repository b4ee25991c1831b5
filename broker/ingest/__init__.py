"""The HTTP ingest API (``warren api``): producers POST events, Warren answers once RabbitMQ confirmed them.

Modules, one concept each: ``schemas`` (request and response models), ``errors`` (error codes and the JSON
error body), ``auth`` (bearer tokens), ``body`` (reading and validating a body), ``eventtypes`` (allowed
types), ``accept`` (ids, checks, publishing and outcomes), ``link`` (the RabbitMQ connection), ``openapi``
(the document), ``app`` (routes and middlewares) and ``server`` (running until a signal).
"""

from warren.broker.ingest.app import create_app
from warren.broker.ingest.link import BrokerLink
from warren.broker.ingest.server import serve

__all__ = ["BrokerLink", "create_app", "serve"]
