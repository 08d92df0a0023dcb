"""One image, from its bytes to what is stored: checks, decodes, re-encoding, its boxes and masks."""
