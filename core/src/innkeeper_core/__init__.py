"""The Innkeeper host."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("innkeeper-core")
except PackageNotFoundError:  # pragma: no cover - running from a source tree without metadata
    __version__ = "0+unknown"
