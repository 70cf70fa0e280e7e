import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.Semaphore;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;

import org.apache.zookeeper.KeeperException;
import org.apache.zookeeper.Op;
import org.apache.zookeeper.OpResult;
import org.apache.zookeeper.Watcher;
import org.apache.zookeeper.ZooKeeper;

/**
 * The failover benchmark's java-floor (benchmarks/java_floor.py compiles and runs it): the writes
 * or reads of one failover issued by ZooKeeper's own Java client, with the batch sizes and the
 * concurrency the product uses, timed inside this JVM. No controller logic: the limit of the
 * server (and of the best client there is) on this machine.
 *
 * Arguments: connect (host:port/chroot) kind (write|read) partitions chunk window epochVersion
 * warmups runs zkPid dataFile. The znodes /s/<i / 100>/<i % 100> and /controller_epoch exist already
 * (made by the harness), every state at version 0.
 *
 * write: each pass sends every state as multi-ops of `chunk` setData behind one check of
 * /controller_epoch's version, at most `window` multis in flight; pass k expects version k.
 * read: each pass reads every state in multiRead requests of `chunk` getData, `window` in flight.
 *
 * The first `warmups` passes warm the JIT up (a controller's client is warm) and are marked so;
 * the harness reports the `runs` after them. Prints one JSON line per pass: wall
 * ms, this JVM's CPU ms, the ZooKeeper server's CPU ms (from procfs, -1 without it) and this
 * JVM's peak RSS during the pass (VmHWM, reset before the pass where the kernel allows).
 */
public final class Floor {
    private static final int PER_TOPIC = 100;

    public static void main(String[] args) throws Exception {
        if (args.length != 10) {
            System.err.println("usage: Floor connect write|read partitions chunk window epochVersion warmups runs zkPid dataFile");
            System.exit(2);
        }
        String connect = args[0];
        boolean write = args[1].equals("write");
        int partitions = Integer.parseInt(args[2]);
        int chunk = Integer.parseInt(args[3]);
        int window = Integer.parseInt(args[4]);
        int epochVersion = Integer.parseInt(args[5]);
        int warmups = Integer.parseInt(args[6]);
        int passes = warmups + Integer.parseInt(args[7]);
        long zkPid = Long.parseLong(args[8]);
        byte[] data = Files.readAllBytes(Path.of(args[9]));

        CountDownLatch connected = new CountDownLatch(1);
        ZooKeeper zk = new ZooKeeper(connect, 30000, event -> {
            if (event.getState() == Watcher.Event.KeeperState.SyncConnected) {
                connected.countDown();
            }
        });
        if (!connected.await(30, TimeUnit.SECONDS)) {
            System.err.println("no ZooKeeper session within 30 s at " + connect);
            System.exit(1);
        }
        String[] paths = new String[partitions];
        for (int i = 0; i < partitions; i++) {
            paths[i] = "/s/" + (i / PER_TOPIC) + "/" + (i % PER_TOPIC);
        }
        try {
            for (int pass = 0; pass < passes; pass++) {
                List<List<Op>> requests = write ? writes(paths, data, chunk, epochVersion, pass) : reads(paths, chunk);
                resetPeakRss();
                long cpu0 = cpuTicks("self");
                long zk0 = zkPid > 0 ? cpuTicks(Long.toString(zkPid)) : -1;
                long t0 = System.nanoTime();
                run(zk, requests, window);
                long elapsed = System.nanoTime() - t0;
                long cpu1 = cpuTicks("self");
                long zk1 = zkPid > 0 ? cpuTicks(Long.toString(zkPid)) : -1;
                System.out.printf("{\"pass\": %d, \"warmup\": %b, \"total_ms\": %.3f, \"cpu_ms\": %d, \"zookeeper_cpu_ms\": %d, "
                                  + "\"peak_rss_kb\": %d}%n", pass, pass < warmups, elapsed / 1e6, ticksToMs(cpu1 - cpu0),
                                  zk0 < 0 || zk1 < 0 ? -1 : ticksToMs(zk1 - zk0), peakRssKb());
                System.out.flush();
            }
        } finally {
            zk.close();
        }
    }

    private static List<List<Op>> writes(String[] paths, byte[] data, int chunk, int epochVersion, int version) {
        List<List<Op>> out = new ArrayList<>();
        for (int i = 0; i < paths.length; i += chunk) {
            List<Op> ops = new ArrayList<>(chunk + 1);
            ops.add(Op.check("/controller_epoch", epochVersion));
            for (int j = i; j < Math.min(i + chunk, paths.length); j++) {
                ops.add(Op.setData(paths[j], data, version));
            }
            out.add(ops);
        }
        return out;
    }

    private static List<List<Op>> reads(String[] paths, int chunk) {
        List<List<Op>> out = new ArrayList<>();
        for (int i = 0; i < paths.length; i += chunk) {
            List<Op> ops = new ArrayList<>(chunk);
            for (int j = i; j < Math.min(i + chunk, paths.length); j++) {
                ops.add(Op.getData(paths[j]));
            }
            out.add(ops);
        }
        return out;
    }

    /** Sends every request, at most `window` unanswered; fails on any error result. */
    private static void run(ZooKeeper zk, List<List<Op>> requests, int window) throws Exception {
        Semaphore inFlight = new Semaphore(window);
        CountDownLatch done = new CountDownLatch(requests.size());
        AtomicReference<String> failure = new AtomicReference<>();
        for (List<Op> ops : requests) {
            inFlight.acquire();
            zk.multi(ops, (rc, path, ctx, results) -> {
                if (rc != 0) {
                    failure.compareAndSet(null, "multi failed: " + KeeperException.Code.get(rc));
                } else {
                    for (OpResult r : results) {
                        if (r instanceof OpResult.ErrorResult) {
                            failure.compareAndSet(null, "operation failed: "
                                + KeeperException.Code.get(((OpResult.ErrorResult) r).getErr()));
                        }
                    }
                }
                inFlight.release();
                done.countDown();
            }, null);
        }
        if (!done.await(600, TimeUnit.SECONDS)) {
            throw new IllegalStateException("no answer to every request within 600 s");
        }
        if (failure.get() != null) {
            throw new IllegalStateException(failure.get());
        }
    }

    private static long cpuTicks(String pid) {
        try {
            String stat = Files.readString(Path.of("/proc/" + pid + "/stat"), StandardCharsets.US_ASCII);
            String[] fields = stat.substring(stat.lastIndexOf(')') + 2).split(" ");
            return Long.parseLong(fields[11]) + Long.parseLong(fields[12]);  // utime, stime
        } catch (Exception e) {
            return -1;
        }
    }

    private static long ticksToMs(long ticks) {
        return ticks * 10;  // USER_HZ is 100 on Linux
    }

    private static void resetPeakRss() {
        try {
            Files.writeString(Path.of("/proc/self/clear_refs"), "5");
        } catch (Exception e) {
            // an older kernel or a sandbox: the peak then covers the JVM's life so far
        }
    }

    private static long peakRssKb() {
        try {
            for (String line : Files.readAllLines(Path.of("/proc/self/status"))) {
                if (line.startsWith("VmHWM:")) {
                    return Long.parseLong(line.replaceAll("[^0-9]", ""));
                }
            }
        } catch (Exception e) {
            // no procfs
        }
        return -1;
    }
}
