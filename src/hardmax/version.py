"""The library's version (one home: the package root, run records and the command line read it here)."""

__version__ = "0.1.0"
