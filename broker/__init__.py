"""Warren's broker side: connecting, publishing events with confirms, and declaring the topology.

Publishing (``connect``, ``Event``, ``Publisher``) is also exported from ``warren`` itself. ``apply_setup`` is
what ``warren setup`` runs. The ingest API, the dead-letter tools and the management client live in their own
modules.
"""

from __future__ import annotations

from warren.broker.applier import SetupFailed, SetupReport, apply_setup
from warren.broker.connection import connect
from warren.broker.events import Event
from warren.broker.publisher import Publisher, PublishReport

__all__ = ["Event", "PublishReport", "Publisher", "SetupFailed", "SetupReport", "apply_setup", "connect"]
