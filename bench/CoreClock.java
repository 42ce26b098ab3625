/**
 * Prints the clock its cores run at, in GHz, measured: one thread per core squares a number over and over.
 * Each square needs the one before, and a 64-bit multiply takes 3 cycles on x86-64 cores (Intel since
 * Nehalem, AMD since Zen: Agner Fog's instruction tables, uops.info), so a thread's squares per second x 3
 * is its core's cycles per second, turbo included, whatever /proc/cpuinfo says. All threads run at once, as
 * on a loaded machine; each round is timed by the thread's own CPU time, so that other processes sharing
 * the cores do not count; the figure is the slowest thread's fastest round.
 *
 * Usage: java CoreClock THREADS
 */
public final class CoreClock {
    private static final int SQUARES_PER_ROUND = 50_000_000;
    private static final int ROUNDS = 12;
    private static final double CYCLES_PER_MULTIPLY = 3.0;
    private static final java.lang.management.ThreadMXBean CPU =
            java.lang.management.ManagementFactory.getThreadMXBean();

    public static void main(String[] args) throws InterruptedException {
        int threads = Integer.parseInt(args[0]);
        double[] ghz = new double[threads];
        long[] sink = new long[threads]; // the squares, kept so the compiler cannot drop them
        Thread[] workers = new Thread[threads];
        for (int t = 0; t < threads; t++) {
            final int slot = t;
            workers[t] = new Thread(() -> {
                long x = 3 + 2L * slot; // odd, so its squares stay odd and never reach 0
                long fastest = Long.MAX_VALUE;
                for (int round = 0; round < ROUNDS; round++) {
                    long began = CPU.getCurrentThreadCpuTime();
                    for (int i = 0; i < SQUARES_PER_ROUND; i++) {
                        x *= x;
                    }
                    fastest = Math.min(fastest, CPU.getCurrentThreadCpuTime() - began);
                }
                sink[slot] = x;
                ghz[slot] = SQUARES_PER_ROUND * CYCLES_PER_MULTIPLY / fastest;
            });
            workers[t].start();
        }
        for (Thread worker : workers) {
            worker.join();
        }
        System.out.printf("%.3f%n", java.util.Arrays.stream(ghz).min().getAsDouble());
    }
}
