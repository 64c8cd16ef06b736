"""The version of toolscout and of toolscout-client: this line is its only source.

Both distributions read it when they are built (``[tool.hatch.version]`` in each pyproject.toml);
``toolscout.client.__version__`` and ``toolscout --version`` report it. Bump it with CHANGELOG.md.
"""

__version__ = "0.2.0"
