"""The package version, in a module that imports nothing: setup.cfg reads it without importing the
package, and the dump schema stamps it without importing the package root (which imports compare,
which imports dump)."""

__version__ = "0.1.0"
