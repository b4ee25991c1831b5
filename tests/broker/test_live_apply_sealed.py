"""Live apply seals the signing secrets it announces: the endpoints stream's bytes hold none in plain text; a
worker with the store's keys (any of them: keys rotate) signs verifiably; a worker without them, or with a wrong
one, says so for the live endpoint, keeps its messages queued and serves its file's endpoints."""

from __future__ import annotations

import base64
import contextlib
import logging
from collections.abc import Callable

import orjson
import pytest
from cryptography.fernet import Fernet
from standardwebhooks import Webhook

from tests.conftest import TEST_SECRET, TEST_STORE_KEY
from tests.consumers.test_live_endpoints import publish
from tests.support.receiver import Receiver
from tests.support.topology import declare
from warren.broker.amqp.connection import connect
from warren.broker.amqp.probe import QueueProbe
from warren.broker.amqp.stream_read import read_to_end
from warren.broker.endpoint_records import EndpointRecord, SecretsUnavailable
from warren.broker.live_apply import apply_endpoint
from warren.consumers.worker import Worker
from warren.store.keys import sealer_from
from warren.topology import names
from warren.topology.config import Endpoint, WarrenConfig
from warren.topology.secrets import SigningSecrets, WebhookSecret

SECOND_SECRET = "whsec_" + base64.b64encode(b"a second signing key, 32 bytes!!").decode()


def live_endpoint(receiver: Receiver, name: str, secret: str | list[str] = TEST_SECRET) -> Endpoint:
    return Endpoint.model_validate(
        {"name": name, "url": f"{receiver.url}/{name}", "secret": secret, "events": ["#"], "tenant": "k"}
    )


def with_keys(config: WarrenConfig, *keys: str) -> WarrenConfig:
    return config.model_copy(update={"store": config.store.model_copy(update={"keys": keys})})


async def stream_bodies(config: WarrenConfig) -> list[bytes]:
    """Every message of the endpoints stream, as RabbitMQ stores it."""
    connection = await connect(config.broker.url)
    try:
        channel = await connection.channel(publisher_confirms=True)
        return await read_to_end(connection, channel, names.endpoints_stream(config.broker.prefix), lambda m: m.body)
    finally:
        await connection.close()


@pytest.mark.timeout(20)
async def test_the_stream_holds_no_secret_in_plain_text(make_config: Callable[..., WarrenConfig]) -> None:
    # Given a deployment, and a live endpoint in the middle of a secret rotation (two secrets)
    config = make_config([])
    await declare(config)
    async with Receiver() as receiver:
        await apply_endpoint(config, live_endpoint(receiver, "sealed", [TEST_SECRET, SECOND_SECRET]))
    # When the endpoints stream is read raw
    bodies = await stream_bodies(config)
    # Then neither secret shows, in whsec_ form, as its base64 key, or as its key bytes
    assert len(bodies) == 1
    for secret in (TEST_SECRET, SECOND_SECRET):
        key_text = secret.removeprefix("whsec_")
        for needle in (secret.encode(), key_text.encode(), base64.b64decode(key_text)):
            assert needle not in bodies[0]
    # And the record says its secrets are sealed, and the store's key opens them to the endpoint's secrets
    record = orjson.loads(bodies[0])
    assert record["sealed"] == "fernet"
    fernet = Fernet(TEST_STORE_KEY.encode())
    assert [fernet.decrypt(t.encode()).decode() for t in record["config"]["secret"]] == [TEST_SECRET, SECOND_SECRET]


@pytest.mark.timeout(30)
async def test_a_worker_with_the_key_signs_verifiably(make_config: Callable[..., WarrenConfig]) -> None:
    # Given a worker whose keys are a newer key first and the announcer's key after it (a store key rotation)
    config = make_config([])
    await declare(config)
    worker_config = with_keys(config, Fernet.generate_key().decode(), TEST_STORE_KEY)
    async with Receiver() as receiver, Worker(worker_config, name="keyed") as worker:
        # When a live endpoint is applied and events are published for its tenant
        await apply_endpoint(config, live_endpoint(receiver, "keyed"))
        ids = [f"e{n}" for n in range(20)]
        await publish(config, ids, "k")
        # Then every event arrives, signed with the endpoint's secret (checked by the standardwebhooks package)
        await receiver.wait_for(lambda r: set(ids) <= r.ok_ids(), timeout=10)
        verifier = Webhook(TEST_SECRET)
        for request in receiver.received:
            assert verifier.verify(request.body.decode(), request.headers)["id"] == request.headers["webhook-id"]
        assert worker.live is not None and worker.live.unopened == {}


@pytest.mark.parametrize(
    ("keys", "why"),
    [
        (("env:WARREN_TEST_NO_SUCH_STORE_KEY",), "has none usable"),
        ((Fernet.generate_key().decode(),), "open with none of"),
    ],
    ids=["no-key", "wrong-key"],
)
@pytest.mark.timeout(30)
async def test_a_worker_without_the_key_reports_it_and_serves_the_rest(
    make_config: Callable[..., WarrenConfig],
    caplog: pytest.LogCaptureFixture,
    keys: tuple[str, ...],
    why: str,
) -> None:
    caplog.set_level(logging.INFO, logger="warren.live")
    async with Receiver() as receiver:
        # Given a file endpoint, a live endpoint announced before the worker starts, and a worker without the key
        config = make_config([{"name": "filed", "url": f"{receiver.url}/filed", "events": ["#"], "tenant": "k"}])
        await declare(config)
        await apply_endpoint(config, live_endpoint(receiver, "before"))
        async with Worker(with_keys(config, *keys), name="keyless") as worker:
            assert worker.live is not None
            # When another live endpoint is announced while it runs, and events are published for the tenant
            await apply_endpoint(config, live_endpoint(receiver, "after"))
            ids = [f"e{n}" for n in range(20)]
            await publish(config, ids, "k")
            # Then the file's endpoint gets every event
            await receiver.wait_for(lambda r: set(ids) <= r.ok_ids("/hook/filed"), timeout=10)
            await receiver.wait_for(lambda _: "after" in worker.live.unopened, timeout=5)  # type: ignore[union-attr]
            # And each live endpoint is reported, not served: its events wait in its queue, none lost
            assert set(worker.live.unopened) == {"before", "after"}
            assert all(why in problem for problem in worker.live.unopened.values())
            errors = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
            assert any("before not served" in e for e in errors) and any("after not served" in e for e in errors)
            assert not receiver.ok_ids("/hook/before") and not receiver.ok_ids("/hook/after")
            connection = await connect(config.broker.url)
            probe = QueueProbe(connection)
            try:
                for name in ("before", "after"):
                    depth = await probe.depth(names.work_queue(config.broker.prefix, name))
                    assert depth is not None and depth.ready == len(ids)
            finally:
                with contextlib.suppress(Exception):
                    await probe.close()
                await connection.close()


def test_a_record_written_unsealed_is_refused_for_signing_but_still_planned() -> None:
    # Given an apply record as written before secrets were sealed (its secret in plain text, no "sealed")
    body = orjson.dumps(
        {
            "endpoint": "old",
            "action": "apply",
            "version": 1,
            "config": {"name": "old", "url": "http://127.0.0.1:9/old", "secret": [TEST_SECRET], "events": ["#"]},
        }
    )
    record = EndpointRecord.from_bytes(body)
    # Then a worker refuses it clearly, whatever its keys
    with pytest.raises(SecretsUnavailable, match=r"unsealed.*apply the endpoint again"):
        record.endpoint_config(sealer_from((TEST_STORE_KEY,)))
    # And setup still plans its RabbitMQ objects, without touching the secret
    assert record.endpoint_layout().name == "old"
    # And a record sealed with a scheme this release does not know is not read
    with pytest.raises(ValueError, match="unknown here"):
        EndpointRecord.from_bytes(orjson.dumps({**orjson.loads(body), "sealed": "rot13"}))


def test_a_record_carries_each_secrets_end_to_the_worker() -> None:
    # Given an endpoint mid-rotation: the new secret, and the old one ending at a moment
    sealer = sealer_from((TEST_STORE_KEY,))
    secrets = SigningSecrets((WebhookSecret(SECOND_SECRET), WebhookSecret(TEST_SECRET, expires_at=1_800_000_000.5)))
    endpoint = Endpoint(name="rot", url="http://127.0.0.1:9/rot", secret=secrets, events=("#",))
    # When its record goes over the wire and a worker opens it
    body = EndpointRecord.applying(endpoint, "test", sealer).to_message().body
    opened = EndpointRecord.from_bytes(body).endpoint_config(sealer)
    # Then the worker has both secrets, the old one with its end (and the record holds no secret in plain text)
    ends = [(s.reveal(), s.expires_at) for s in opened.secret]
    assert ends == [(SECOND_SECRET, None), (TEST_SECRET, 1_800_000_000.5)]
    assert TEST_SECRET.encode() not in body and SECOND_SECRET.encode() not in body
    # And a record of an endpoint without ends carries none; an end that is not a moment is refused
    unrotated = endpoint.model_copy(update={"secret": SigningSecrets((WebhookSecret(TEST_SECRET),))})
    plain = EndpointRecord.applying(unrotated, "test", sealer)
    assert b"secret_expires" not in plain.to_message().body
    for bad in ("soon", True, [1], {"at": 1}):
        with pytest.raises(ValueError, match="secret_expires"):
            EndpointRecord.from_bytes(orjson.dumps({**orjson.loads(body), "secret_expires": [bad]}))
