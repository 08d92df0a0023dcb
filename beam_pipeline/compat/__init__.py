"""Every use of a third-party library's internals, one module per library, each behind a
named function that says why no public API serves, which versions it was checked with,
and what it falls back to where a public behaviour exists.

An upgrade of Beam, Python or tf.Transform starts here: tests/compat fails loudly on
the first internal that moved, before any run would.
"""
