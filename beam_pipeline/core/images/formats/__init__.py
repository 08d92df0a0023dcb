"""Image files walked byte by byte, without a decoder: a JPEG's segments and a PNG's chunks, and
a PNG written chunk by chunk from its samples.

Validation reads here what Pillow would parse slowly or TensorFlow would refuse late, and
re-encoding writes here what Pillow would write slowly.
"""
