"""A stand-in for replay's clock: wall time advances only when the replay sleeps (no timing in tests)."""
from __future__ import annotations

import time


class FakeClock:
    def __init__(self):
        self.now, self.sleeps = 0.0, []

    def monotonic(self):
        return self.now

    def sleep(self, dt):
        self.sleeps.append(dt)
        self.now += dt

    def time(self):
        return time.time()
