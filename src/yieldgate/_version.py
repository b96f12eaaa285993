"""The package's version, in one place: pyproject.toml reads it (`[tool.setuptools.dynamic]`), and the CLI, the
report and the dashboard import it from here rather than from the package root (which imports them lazily)."""

__version__ = "0.1.0"
