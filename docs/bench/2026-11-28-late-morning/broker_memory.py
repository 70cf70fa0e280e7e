"""What a broker holding 100,000 partitions keeps allocated (tracemalloc) after a new
controller's requests and a broker failure's (see broker_failure_apply.py, whose set-up it
runs). From the repository's root:

    .venv/bin/python docs/bench/2026-11-28-late-morning/broker_memory.py
"""
import asyncio, gc, sys
sys.argv=["x"]
src = open(__file__.replace("broker_memory.py", "broker_failure_apply.py")).read().split("F = lambda")[0]
names: dict = {}
exec(compile(src, "bf", "exec"), names)
Broker, load, fail = names["Broker"], names["load"], names["fail"]
import tracemalloc
F = lambda api, body: type("F", (), {"api": api, "body": body})()
async def main():
    gc.collect(); tracemalloc.start(); a = tracemalloc.get_traced_memory()[0]
    b = Broker(2, None); b.set_broker_epoch(102)
    for api, body in load: await b.handle(F(api, body))
    for api, body in fail: await b.handle(F(api, body))
    gc.collect()
    print(f"broker holding {len(b._leader_epochs)} replicas and {len(b._meta_partitions)} cached partitions: "
          f"{(tracemalloc.get_traced_memory()[0]-a)/2**20:.1f} MB traced")
    b.close()
asyncio.run(main())
