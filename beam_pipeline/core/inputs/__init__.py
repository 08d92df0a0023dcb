"""Inputs: manifests read and cut in parts, annotation files, class names and labels, and reading files."""
