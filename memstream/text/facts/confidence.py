"""The confidence of a fact: a fixed prior per rule."""

from __future__ import annotations

__all__ = ["CONFIDENCE"]

CONFIDENCE: dict[str, float] = {
    "terse": 0.95,
    "name_explicit": 0.95,  # my name is, call me, je m'appelle
    "name_im": 0.7,  # I'm Marco
    "identity": 0.9,
    "role": 0.8,
    "nationality": 0.75,
    "preference": 0.8,
    "favorite": 0.9,
    "tool": 0.75,
    "decision": 0.85,
    "decision_soft": 0.7,  # let's go with, we'll go with
    "assistant_factor": 0.8,  # decisions stated by the assistant
    "constraint": 0.75,
    "value_named": 0.8,
    "value_mention": 0.5,
    "version": 0.7,
    "note": 0.8,
    "update": 0.8,  # a newer value said as a change: moved to, started at, switched to, my new number
    "retraction": 0.8,  # a value said to hold no longer: anymore, no longer, left, used to
}
