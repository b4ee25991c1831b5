"""Declare a Plan for a test: the applier's own declare (no drift checks: tests start from a fresh prefix)."""

from __future__ import annotations

from warren.broker.applier import declare_plan

__all__ = ["declare_plan"]
