"""The Beam side: options, the pipeline graph and its DoFns, coders, the output directory
and its commit, and what runs a local conversion (runner and worker pool)."""
