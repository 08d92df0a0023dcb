"""The output directory as the pipeline writes it: files staged and committed (output_dir,
commit), its lock (output_lock) and the errors files (errors_files)."""
