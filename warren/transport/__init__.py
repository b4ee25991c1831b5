"""Signing and sending one webhook: the transport seam and its HTTP implementation.

``base`` is the seam (``Transport.send(endpoint, delivery) -> SendResult``, and ``Delivery``, what a transport is
given); ``http`` sends over aiohttp with Standard Webhooks headers (``signing``), behind the private-address guard
(``egress``), and reads the answer (``classify``, ``retry_after``). The worker delivers through it, and the admin
API's test-send too.
"""
