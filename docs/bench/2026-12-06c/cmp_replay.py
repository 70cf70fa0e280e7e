"""Plain replay of a soak's journals: offline per partition, failures, verdict (JSON to stdout)."""
import json, sys
from replay import local
r = local.replay(sys.argv[1])
off = {f'{x["topic"]}-{x["partition"]}': x["offline_ms"] for x in r.tables["partition_offline"]}
print(json.dumps({"passed": r.passed, "violations": sum(f["severity"] == "violation" for f in r.findings),
                  "offline": off, "failures": [(f["broker"], f["partitions"], f["unrecovered"], f["recovery_ms"]) for f in r.tables["broker_failures"]]}))
