"""The Tracker: throughput and learning signals from inside a PyTorch training loop."""

from yieldgate.track.tracker import Tracker, TrackerConfig

__all__ = ["Tracker", "TrackerConfig"]
