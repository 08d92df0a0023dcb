"""Looking at a finished output: its summary, verify, and inspect's contact sheet and plots.

Free of Beam: these read what the conversion committed, with TensorFlow's file
systems (local and gs://) where they read records.
"""
