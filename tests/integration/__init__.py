"""Tests that train real models, run fleets of processes, drive a browser or a server: `make test-all` (CI), not
`make test`. Every module here is marked slow as a whole."""
