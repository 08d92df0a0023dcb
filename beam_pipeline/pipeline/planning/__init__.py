"""Planning as Beam transforms: identical files grouped, near copies found and merged, splits
assigned and shards planned (content_groups, near_copy_groups), or all of it in one step in
memory on the DirectRunner (in_memory); the plain functions they call are core/planning's."""
