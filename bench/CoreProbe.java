/**
 * Two probes of this machine's cores. Each runs on THREADS threads at once, as on a loaded machine, and
 * times its rounds by each thread's own CPU time, so that other processes sharing the cores do not count.
 *
 * clock: the GHz the cores run at. A thread squares a number over and over; each square needs the one
 * before, and a 64-bit multiply takes 3 cycles on x86-64 cores (Intel since Nehalem, AMD since Zen: Agner
 * Fog's instruction tables, uops.info), so squares per CPU second x 3 are the core's cycles per second,
 * turbo included, whatever /proc/cpuinfo says. Prints the slowest thread's fastest round.
 *
 * share: how much of a lone thread's work each thread does when all run at once (1.00: each has a core of
 * its own). A thread keeps eight independent shift-and-xor chains going, more integer work than a core's
 * units start in a cycle, so the figure is what a core's units do rather than its clock (which sharing does
 * not change). Two virtual cores that are one physical core's hyperthreads share its units and get about
 * half each. A lone run before the measured ones lets the compiler finish; then lone runs and runs of all
 * threads take turns, so that a neighbour on the host slows both alike, and the median of their ratios
 * counts, each run's figure its median round (its fastest could be one a sibling sat out).
 *
 * Usage: java CoreProbe clock|share THREADS
 */
public final class CoreProbe {
    private static final java.lang.management.ThreadMXBean CPU =
            java.lang.management.ManagementFactory.getThreadMXBean();
    private static final int SQUARES_PER_ROUND = 50_000_000;
    private static final int CLOCK_ROUNDS = 12;
    private static final double CYCLES_PER_MULTIPLY = 3.0;
    private static final int STEPS_PER_ROUND = 50_000_000;
    private static final int SHARE_ROUNDS = 3;
    private static final int SHARE_TRIALS = 7;
    private static volatile long sink; // the loops' results, kept so the compiler cannot drop them

    public static void main(String[] args) throws InterruptedException {
        int threads = Integer.parseInt(args[1]);
        double figure;
        if (args[0].equals("clock")) {
            figure = java.util.Arrays.stream(onThreads(threads, CoreProbe::clockGhz)).min().getAsDouble();
        } else if (args[0].equals("share")) {
            onThreads(1, CoreProbe::stepsPerCpuSecond); // not counted: the compiler's, as it runs on the fly
            double[] shares = new double[SHARE_TRIALS];
            for (int trial = 0; trial < SHARE_TRIALS; trial++) {
                double alone = onThreads(1, CoreProbe::stepsPerCpuSecond)[0];
                shares[trial] = java.util.Arrays.stream(onThreads(threads, CoreProbe::stepsPerCpuSecond))
                        .average().getAsDouble() / alone;
            }
            java.util.Arrays.sort(shares);
            figure = shares[SHARE_TRIALS / 2];
        } else {
            throw new IllegalArgumentException("usage: java CoreProbe clock|share THREADS");
        }
        System.out.printf("%.3f%n", figure);
    }

    /** What {@code work} returns for each of {@code threads} threads, all started at once. */
    private static double[] onThreads(int threads, java.util.function.IntToDoubleFunction work)
            throws InterruptedException {
        double[] figures = new double[threads];
        Thread[] workers = new Thread[threads];
        for (int t = 0; t < threads; t++) {
            final int slot = t;
            workers[t] = new Thread(() -> figures[slot] = work.applyAsDouble(slot));
            workers[t].start();
        }
        for (Thread worker : workers) {
            worker.join();
        }
        return figures;
    }

    private static double clockGhz(int slot) {
        long x = 3 + 2L * slot; // odd, so its squares stay odd and never reach 0
        long fastest = Long.MAX_VALUE;
        for (int round = 0; round < CLOCK_ROUNDS; round++) {
            long began = CPU.getCurrentThreadCpuTime();
            for (int i = 0; i < SQUARES_PER_ROUND; i++) {
                x *= x;
            }
            fastest = Math.min(fastest, CPU.getCurrentThreadCpuTime() - began);
        }
        sink ^= x;
        return SQUARES_PER_ROUND * CYCLES_PER_MULTIPLY / fastest;
    }

    private static double stepsPerCpuSecond(int slot) {
        long a = 1, b = 2, c = 3, d = 4, e = 5, f = 6, g = 7, h = 8 + slot;
        long[] took = new long[SHARE_ROUNDS];
        for (int round = 0; round < SHARE_ROUNDS; round++) {
            long began = CPU.getCurrentThreadCpuTime();
            for (int i = 0; i < STEPS_PER_ROUND; i++) {
                a = (a << 1) ^ (a >>> 3);
                b = (b << 1) ^ (b >>> 5);
                c = (c << 3) ^ (c >>> 1);
                d = (d << 5) ^ (d >>> 1);
                e = (e << 1) ^ (e >>> 7);
                f = (f << 7) ^ (f >>> 1);
                g = (g << 3) ^ (g >>> 5);
                h = (h << 5) ^ (h >>> 3);
            }
            took[round] = CPU.getCurrentThreadCpuTime() - began;
        }
        sink ^= a ^ b ^ c ^ d ^ e ^ f ^ g ^ h;
        java.util.Arrays.sort(took);
        return STEPS_PER_ROUND * 1e9 / took[SHARE_ROUNDS / 2];
    }
}
