"""Images made up on the spot: the quick start's sample set (``make run``), and the pictures the
tests and the benchmarks need (photos, PetImages-like files, near copies of each kind and
gradients that differ only in hue, images made to raise each quality flag, the frames of fixed
cameras). Every file depends only on its seed, so every machine makes the same ones, and no
large binary is committed."""
