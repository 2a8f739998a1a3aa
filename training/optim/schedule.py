"""Learning-rate schedules: linear warm-up, then cosine decay to a fraction of the peak.

AFM core: peak 0.01 (on the μParam base width), 5000 warm-up steps, cosine to 0.005 of peak.
AFM continued and context-lengthening: peak 3e-4, 1000 warm-up steps, decay to 0.001 of peak.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from manifests.errors import ConfigError


@dataclass(frozen=True, kw_only=True)
class WarmupCosine:
    warmup_steps: int
    total_steps: int
    final_fraction: float  # of the peak, reached at total_steps

    def __post_init__(self):
        if self.total_steps <= 0 or self.warmup_steps < 0 or self.warmup_steps > self.total_steps:
            raise ConfigError(f"schedule: need 0 <= warmup_steps ({self.warmup_steps}) <= total_steps "
                              f"({self.total_steps}) and total_steps > 0")
        if not 0 <= self.final_fraction <= 1:
            raise ConfigError(f"schedule.final_fraction must be in [0, 1]; got {self.final_fraction}")

    def factor(self, step: int) -> float:
        """Multiplier s_t in (0, 1] for 0-based `step`."""
        if step < self.warmup_steps:
            return (step + 1) / self.warmup_steps
        span = max(1, self.total_steps - self.warmup_steps)
        progress = min(1.0, (step - self.warmup_steps) / span)
        return self.final_fraction + (1 - self.final_fraction) * 0.5 * (1 + math.cos(math.pi * progress))

    def apply(self, optimizer, step: int) -> float:
        """Set each group's lr = base_lr · s_t and schedule = s_t; returns s_t."""
        s = self.factor(step)
        for group in optimizer.param_groups:
            group["lr"] = group["base_lr"] * s
            group["schedule"] = s
        return s
