"""Planning: identical files grouped, near copies found and merged, splits assigned and shards
planned, described once (planner) over two executors (steps): each step a Beam transform on
Dataflow, or all of them on lists in one step of the graph on the DirectRunner. The steps'
functions are content_groups' and near_copy_groups'; the plain ones they call, core/planning's."""
