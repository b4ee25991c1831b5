"""The HTTP ingest API: producers POST events, Warren answers once RabbitMQ confirmed them.

Modules, one concept each: ``schemas`` (request and response models), ``errors`` (error codes and the JSON
error body), ``auth`` (bearer tokens), ``body`` (reading and validating a body), ``eventtypes`` (allowed
types), ``accept`` (ids, checks, publishing and outcomes), ``link`` (the RabbitMQ connection), ``openapi``
(the document) and ``app`` (routes and middlewares). ``warren.api.app`` adds the admin API to it and
``warren.api.server`` runs the whole until a signal.
"""

from warren.api.ingest.app import create_ingest_app
from warren.api.ingest.link import BrokerLink

__all__ = ["BrokerLink", "create_ingest_app"]
