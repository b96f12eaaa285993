"""The Tracker: throughput and learning signals from inside a PyTorch training loop."""

from yieldgate.track.config import TrackerConfig
from yieldgate.track.tracker import Tracker

__all__ = ["Tracker", "TrackerConfig"]
