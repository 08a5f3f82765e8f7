"""Why a model path could not produce an answer; the engine turns each into a user message."""

from __future__ import annotations


class ModelUnavailable(RuntimeError):
    """The model can't be used right now (after the client's retries): fall back, don't fail."""


class NoResponse(RuntimeError):
    """The model was reachable but did not produce a valid answer, even when asked again."""


class ToolsUnsupported(RuntimeError):
    """The model ignored a forced tool call: it can't do tool use, so search for it."""
