"""Helpers shared by the tests: synthetic images, commands in subprocesses, readers of the output, fakes of the network."""
