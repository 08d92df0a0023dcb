"""The Beam side: the pipeline graph (graph.py) and its transforms and DoFns, coders, the
output directory, its lock and its commit, and how a local run is handed to the DirectRunner
(local_runner). The options are the command line's (cli/options.py); the worker pool that runs
a local run's heavy steps is local/."""
