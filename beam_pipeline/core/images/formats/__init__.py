"""Image files walked byte by byte, without a decoder: a JPEG's segments and a PNG's chunks.

Validation reads here what Pillow would parse slowly or TensorFlow would refuse late.
"""
