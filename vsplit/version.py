"""The package version, in a module of its own so that the CLI can print it without importing the package's front.

Example:
    >>> from vsplit.version import __version__
    >>> __version__.count(".")
    2
"""

__version__ = "0.1.0"
