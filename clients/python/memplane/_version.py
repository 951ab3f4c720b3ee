"""The SDK version, kept apart so internal modules can read it without importing the package root."""

__version__ = "0.1.0"
