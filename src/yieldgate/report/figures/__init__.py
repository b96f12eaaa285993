"""The report's plotly figures: `base` (the shared figure code), `runs` (a report's runs), `results` (one result
object: comparison, forecast, diagnosis, frontier) and `signals` (learning signals)."""
