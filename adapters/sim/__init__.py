"""Running a cluster on one machine: local clusters of real node processes, a fault-injecting TCP proxy, and the chaos soak."""
