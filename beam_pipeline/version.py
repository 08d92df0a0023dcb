"""The version of this package, read by setup.py and written into every run record."""
__version__ = '0.2.0'
