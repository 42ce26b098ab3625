import java.util.Properties;
import java.util.concurrent.atomic.AtomicLong;

import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.errors.TimeoutException;
import org.apache.kafka.common.serialization.ByteArraySerializer;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * A service that writes keyed records with Kafka's own Java producer at a steady rate: the real client
 * whose buffer fills and whose send() blocks when the partitions of its keys lose their leader.
 *
 * <p>Usage: KeyedProducer BOOTSTRAP TOPIC CLIENT_ID MESSAGES_PER_S MESSAGE_BYTES KEYS [producer.key=value ...]
 *
 * <p>Keys are "customer-0" .. "customer-(KEYS-1)" in turn, so every partition gets its share and records
 * for a partition without a leader pile up in the accumulator (a record without a key would go to a
 * partition that has one). Every 5 s it prints one line: records sent, acknowledged, failed, send() calls
 * that timed out after max.block.ms, and the longest send() call of the interval.
 */
public class KeyedProducer {
    public static void main(String[] args) throws Exception {
        if (args.length < 6) {
            System.err.println("usage: KeyedProducer BOOTSTRAP TOPIC CLIENT_ID MESSAGES_PER_S MESSAGE_BYTES KEYS [k=v ...]");
            System.exit(2);
        }
        String topic = args[1];
        double perSecond = Double.parseDouble(args[3]);
        byte[] value = new byte[Integer.parseInt(args[4])];
        int keys = Integer.parseInt(args[5]);
        Properties props = new Properties();
        props.put("bootstrap.servers", args[0]);
        props.put("client.id", args[2]);
        props.put("key.serializer", StringSerializer.class.getName());
        props.put("value.serializer", ByteArraySerializer.class.getName());
        for (int i = 6; i < args.length; i++) {
            String[] kv = args[i].split("=", 2);
            props.put(kv[0], kv[1]);
        }
        AtomicLong acked = new AtomicLong(), failed = new AtomicLong();
        long sent = 0, timeouts = 0, slowestNs = 0;
        KafkaProducer<String, byte[]> producer = new KafkaProducer<>(props);
        Runtime.getRuntime().addShutdownHook(new Thread(() -> producer.close(java.time.Duration.ZERO)));
        System.out.println("keyed-producer ready");
        long start = System.nanoTime(), nextReport = start + 5_000_000_000L;
        for (long n = 0; ; n++) {
            long due = start + (long) (n * 1e9 / perSecond);
            long wait = due - System.nanoTime();
            if (wait < -1_000_000_000L) {  // blocked for a while: go on at the rate, no burst to catch up
                start -= wait;
                wait = 0;
            }
            if (wait > 0) Thread.sleep(wait / 1_000_000, (int) (wait % 1_000_000));
            long before = System.nanoTime();
            try {
                producer.send(new ProducerRecord<>(topic, "customer-" + (n % keys), value), (meta, error) -> {
                    if (error == null) acked.incrementAndGet(); else failed.incrementAndGet();
                });
                sent++;
            } catch (TimeoutException e) {  // the buffer stayed full for max.block.ms
                timeouts++;
            } catch (IllegalStateException e) {  // closed by the shutdown hook: the process is ending
                return;
            }
            slowestNs = Math.max(slowestNs, System.nanoTime() - before);
            if (System.nanoTime() >= nextReport) {
                System.out.printf("sent=%d acked=%d failed=%d send_timeouts=%d slowest_send_ms=%d%n",
                        sent, acked.get(), failed.get(), timeouts, slowestNs / 1_000_000);
                slowestNs = 0;
                nextReport += 5_000_000_000L;
            }
        }
    }
}
