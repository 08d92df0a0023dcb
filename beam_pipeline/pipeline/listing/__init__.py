"""The input listed where it lies: what --input names, its parts, folders, objects and annotations."""
