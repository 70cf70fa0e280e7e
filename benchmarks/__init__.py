"""kctl's benchmarks: the failover benchmark (`kctl bench failover`), its floors and meters, and
the micro-benchmarks of the core, the journal, ZooKeeper and the replay. Results and the commands
that produced them: benchmarks/README.md."""
