"""Analysis: yields, fits and forecasts, comparisons, diagnosis. Plain data in, plain data out."""
