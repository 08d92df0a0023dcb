"""Helpers shared by the tests: synthetic images, commands in subprocesses, readers of the
output, and offline stand-ins for the network."""
