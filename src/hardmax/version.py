"""The library's version (one home: the package root, run records and the command line read it here)."""

__all__ = ["__version__"]

#: The version of the library.
__version__ = "0.1.0"
