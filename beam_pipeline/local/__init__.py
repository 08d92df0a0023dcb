"""The local worker pool: processes forked ready with TensorFlow imported, which run the heavy
steps of a conversion on this machine. Free of Beam; the Beam side hands it work."""
