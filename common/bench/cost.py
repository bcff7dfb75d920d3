"""Cost per image from a machine's hourly price and its sustained throughput."""

from __future__ import annotations

import math


def cost_per_1000_images(price_per_hour: float, images_per_minute: float) -> float:
    """Dollars (or whatever currency the price is in) per 1,000 images; NaN at zero throughput."""
    if price_per_hour < 0:
        raise ValueError(f"price per hour cannot be negative: {price_per_hour}")
    if images_per_minute <= 0:
        return math.nan
    return price_per_hour / (images_per_minute * 60.0) * 1000.0
