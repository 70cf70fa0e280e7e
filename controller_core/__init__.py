"""The pure controller core: Kafka 2.4's controller decisions as `step(state, event)`.

Imports only the standard library, attrs and immutables: no I/O, no clock, no randomness.
"""
from .state import ControllerConfig, ControllerState, initial_state
from .step import step

__all__ = ["ControllerConfig", "ControllerState", "initial_state", "step"]
