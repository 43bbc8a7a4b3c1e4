"""The package's version, written once: ``pyproject.toml`` reads it (setuptools'
dynamic ``attr``) and ``pyproflab.__version__`` is this name. Its own module,
below every layer, so that reports and the CLI print it without importing the
package's front door."""

__version__ = "0.1.0"
