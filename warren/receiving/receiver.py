"""``warren receive``: the verifying front door for webhooks from outside. Accept fast, process later.

For each configured inbound source, ``POST <path>``:

1. reads the raw body (``413`` past ``max_body``) and verifies it (``401`` with a JSON reason);
2. reads the event id, and key and sequence when configured (``400`` when the id is missing);
3. publishes body and headers to ``{prefix}.in.<source>`` with the id as ``message_id`` and waits for
   RabbitMQ's confirm;
4. answers ``202`` at once — or ``503`` with ``Retry-After`` when RabbitMQ did not confirm, so that the
   provider sends it again instead of believing it delivered.

Nothing is deduplicated here: a provider's resend is published again, and ``warren inbox`` drops it.
Keeping this side stateless is what lets it answer within milliseconds.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator

from aio_pika.abc import AbstractConnection
from aiohttp import web
from aiohttp.typedefs import Handler

from warren.broker.amqp.connection import connect
from warren.core.deadlines import within
from warren.core.errors import BrokerUnavailable, PublishError, UnroutableError
from warren.receiving.errors import IdentityError
from warren.receiving.identity import identify
from warren.receiving.inbound_publisher import InboundPublisher
from warren.receiving.messages import encode_inbound, kept_headers
from warren.receiving.middleware import error_response, verified_handler
from warren.receiving.verifiers import Verifier, verifier_for
from warren.topology import names
from warren.topology.config import InboundSource, WarrenConfig

__all__ = ["CONNECTION", "PUBLISHER", "build_receiver_app"]

log = logging.getLogger("warren.receive")

CONNECTION = web.AppKey("warren_connection", AbstractConnection)
PUBLISHER = web.AppKey("warren_inbound_publisher", InboundPublisher)


def _accept(config: WarrenConfig, source: InboundSource, verifier: Verifier) -> Handler:
    queue = names.inbound_queue(config.broker.prefix, source.name)
    settings = config.receiver

    def unavailable(message: str) -> web.Response:
        response = error_response(503, "unavailable", message)
        response.headers["Retry-After"] = str(settings.retry_after)
        return response

    async def accept(request: web.Request, body: bytes) -> web.StreamResponse:
        try:
            identity = identify(source, request.headers, body)
        except IdentityError as exc:
            return error_response(400, "bad_request", str(exc))
        message = encode_inbound(
            source.name,
            identity,
            body,
            kept_headers(request.headers.items(), verifier.secret_headers),
            request.headers.get("Content-Type"),
        )
        publisher = request.app.get(PUBLISHER)
        if publisher is None:
            return unavailable("not connected to RabbitMQ yet")
        try:
            await within(publisher.publish(queue, message), settings.publish_timeout)
        except UnroutableError as exc:
            log.error("%s", exc)
            return unavailable("the inbound queue is missing; the event was not stored")
        except (PublishError, BrokerUnavailable) as exc:
            log.warning("inbound %s: event %s not stored: %s", source.name, identity.id, exc)
            return unavailable("RabbitMQ did not store the event; send it again later")
        except TimeoutError:
            log.warning("inbound %s: event %s not confirmed in %ss", source.name, identity.id, settings.publish_timeout)
            return unavailable("RabbitMQ did not confirm the event in time; send it again later")
        log.debug("inbound %s: accepted event %s", source.name, identity.id)
        return web.json_response({"id": identity.id, "status": "accepted"}, status=202)

    return verified_handler(verifier, accept, max_body=source.max_body, body_timeout=settings.body_timeout)


async def _healthz(_: web.Request) -> web.Response:
    return web.json_response({"status": "ok"})


async def _readyz(request: web.Request) -> web.Response:
    connection = request.app.get(CONNECTION)
    if connection is None or connection.is_closed:
        return error_response(503, "unavailable", "not connected to RabbitMQ")
    return web.json_response({"status": "ready"})


def build_receiver_app(config: WarrenConfig, *, connection: AbstractConnection | None = None) -> web.Application:
    """The aiohttp app serving every ``[[inbound]]`` source.

    Without ``connection`` the app connects to ``config.broker.url`` on startup (failing startup when it
    cannot) and closes the connection on cleanup; a given connection is used and left open.
    """
    largest = max((s.max_body for s in config.inbound), default=1024 * 1024)
    app = web.Application(client_max_size=largest + 1)
    for source in config.inbound:
        app.router.add_post(source.route, _accept(config, source, verifier_for(source)))
    app.router.add_get("/healthz", _healthz)
    app.router.add_get("/readyz", _readyz)

    async def lifecycle(app: web.Application) -> AsyncIterator[None]:
        owned = connection is None
        conn = connection if connection is not None else await connect(config.broker.urls, name="warren-receive")
        app[CONNECTION] = conn
        app[PUBLISHER] = await InboundPublisher.open(conn)
        yield
        # The channel may already be gone with a lost connection; closing what is left must not fail shutdown.
        with contextlib.suppress(Exception):
            await app[PUBLISHER].close()
        if owned:
            await conn.close()

    app.cleanup_ctx.append(lifecycle)
    return app
