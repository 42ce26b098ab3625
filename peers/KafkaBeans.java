// Kafka-named MBeans behind real JMX/RMI endpoints, one endpoint per simulated broker, all in one JVM.
//
// Usage: java KafkaBeans PORT BEANS_FILE [PORT BEANS_FILE ...]
// Each PORT gets its own MBean server, RMI registry and JMX connector on 127.0.0.1 (no SSL), at
// service:jmx:rmi:///jndi/rmi://127.0.0.1:PORT/jmxrmi, as a broker started with com.sun.management.jmxremote;
// with KAFKA_BEANS_CREDENTIALS=user:password in the environment, clients must log in with that user.
// A BEANS_FILE has one bean per line, "KIND OBJECT_NAME ATTRIBUTE=VALUE ...", with the attribute sets Kafka
// registers: gauge (Value), meter (Count, MeanRate, One/Five/FifteenMinuteRate, EventType, RateUnit),
// timer (a meter plus Min, Max, Mean, StdDev, percentiles, LatencyUnit; Yammer metrics), attrs (any names,
// doubles: Kafka's own client metrics). Attributes not given are 0. Prints "kafka-beans ready" when serving.
import java.io.IOException;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.nio.file.Files;
import java.nio.file.Path;
import java.rmi.registry.LocateRegistry;
import java.rmi.server.RMIServerSocketFactory;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import javax.security.auth.Subject;
import javax.management.Attribute;
import javax.management.AttributeList;
import javax.management.AttributeNotFoundException;
import javax.management.DynamicMBean;
import javax.management.MBeanAttributeInfo;
import javax.management.MBeanInfo;
import javax.management.MBeanServer;
import javax.management.MBeanServerFactory;
import javax.management.ObjectName;
import javax.management.remote.JMXAuthenticator;
import javax.management.remote.JMXConnectorServer;
import javax.management.remote.JMXConnectorServerFactory;
import javax.management.remote.JMXPrincipal;
import javax.management.remote.JMXServiceURL;
import javax.management.remote.rmi.RMIConnectorServer;

public class KafkaBeans {
    static final List<String> METER = List.of("Count", "MeanRate", "OneMinuteRate", "FiveMinuteRate",
            "FifteenMinuteRate", "EventType", "RateUnit");
    static final List<String> TIMER_EXTRA = List.of("Min", "Max", "Mean", "StdDev", "50thPercentile",
            "75thPercentile", "95thPercentile", "98thPercentile", "99thPercentile", "999thPercentile",
            "LatencyUnit");
    static final Map<String, String> TEXT = Map.of("EventType", "requests", "RateUnit", "SECONDS",
            "LatencyUnit", "MILLISECONDS");

    /** A bean with a fixed set of read-only attributes. */
    static final class Bean implements DynamicMBean {
        final Map<String, Object> values;

        Bean(Map<String, Object> values) {
            this.values = values;
        }

        public Object getAttribute(String name) throws AttributeNotFoundException {
            if (!values.containsKey(name)) throw new AttributeNotFoundException(name);
            return values.get(name);
        }

        public AttributeList getAttributes(String[] names) {
            AttributeList list = new AttributeList();
            for (String name : names) {
                if (values.containsKey(name)) list.add(new Attribute(name, values.get(name)));
            }
            return list;
        }

        public void setAttribute(Attribute attribute) {
            throw new UnsupportedOperationException("read-only");
        }

        public AttributeList setAttributes(AttributeList attributes) {
            return new AttributeList();
        }

        public Object invoke(String action, Object[] params, String[] signature) {
            throw new UnsupportedOperationException("no operations");
        }

        public MBeanInfo getMBeanInfo() {
            List<MBeanAttributeInfo> infos = new ArrayList<>();
            for (Map.Entry<String, Object> e : values.entrySet()) {
                String type = e.getValue().getClass().getName();
                infos.add(new MBeanAttributeInfo(e.getKey(), type, e.getKey(), true, false, false));
            }
            return new MBeanInfo(Bean.class.getName(), "Kafka-named test bean",
                    infos.toArray(new MBeanAttributeInfo[0]), null, null, null);
        }
    }

    static Object number(String attribute, String text, boolean integral) {
        try {
            return integral ? (Object) Long.parseLong(text) : (Object) Double.parseDouble(text);
        } catch (NumberFormatException e) {
            throw new IllegalArgumentException(attribute + "=" + text + " is not a number");
        }
    }

    static Map<String, Object> attributes(String kind, Map<String, String> given) {
        List<String> names = new ArrayList<>();
        switch (kind) {
            case "gauge" -> names.add("Value");
            case "meter" -> names.addAll(METER);
            case "timer" -> {
                names.addAll(METER);
                names.addAll(TIMER_EXTRA);
            }
            case "attrs" -> names.addAll(given.keySet());
            default -> throw new IllegalArgumentException("unknown kind " + kind + " (gauge|meter|timer|attrs)");
        }
        for (String name : given.keySet()) {
            if (!names.contains(name)) throw new IllegalArgumentException(kind + " has no attribute " + name);
        }
        Map<String, Object> values = new LinkedHashMap<>();
        for (String name : names) {
            if (TEXT.containsKey(name)) {
                values.put(name, TEXT.get(name));
            } else {
                boolean integral = name.equals("Count") || (name.equals("Value") && !given.getOrDefault(
                        name, "0").contains("."));
                values.put(name, number(name, given.getOrDefault(name, "0"), integral));
            }
        }
        return values;
    }

    static MBeanServer load(Path file) throws Exception {
        MBeanServer server = MBeanServerFactory.newMBeanServer();
        for (String line : Files.readAllLines(file)) {
            line = line.strip();
            if (line.isEmpty() || line.startsWith("#")) continue;
            String[] parts = line.split("\\s+");
            if (parts.length < 2) throw new IllegalArgumentException(file + ": expected KIND OBJECT_NAME: " + line);
            Map<String, String> given = new LinkedHashMap<>();
            for (int i = 2; i < parts.length; i++) {
                String[] kv = parts[i].split("=", 2);
                if (kv.length != 2) throw new IllegalArgumentException(file + ": expected NAME=VALUE: " + parts[i]);
                given.put(kv[0], kv[1]);
            }
            server.registerMBean(new Bean(attributes(parts[0], given)), new ObjectName(parts[1]));
        }
        return server;
    }

    /** Accepts exactly the user and password of {@code credentials} ("user:password"), as a broker's JMX
     * password file would. */
    static JMXAuthenticator authenticator(String credentials) {
        String[] expected = credentials.split(":", 2);
        return given -> {
            if (!(given instanceof String[] pair) || pair.length != 2
                    || !expected[0].equals(pair[0]) || !expected[1].equals(pair[1])) {
                throw new SecurityException("Authentication failed! Invalid username or password");
            }
            return new Subject(true, Set.of(new JMXPrincipal(pair[0])), Set.of(), Set.of());
        };
    }

    static JMXConnectorServer serve(int port, MBeanServer server) throws IOException {
        InetAddress loopback = InetAddress.getLoopbackAddress();
        // One factory instance for the registry and the connector, so that both share the port.
        RMIServerSocketFactory sockets = new RMIServerSocketFactory() {
            public ServerSocket createServerSocket(int p) throws IOException {
                return new ServerSocket(p, 50, loopback);
            }
        };
        LocateRegistry.createRegistry(port, null, sockets);
        Map<String, Object> env = new HashMap<>();
        env.put(RMIConnectorServer.RMI_SERVER_SOCKET_FACTORY_ATTRIBUTE, sockets);
        String credentials = System.getenv("KAFKA_BEANS_CREDENTIALS"); // "user:password": clients must log in
        if (credentials != null) {
            env.put(JMXConnectorServer.AUTHENTICATOR, authenticator(credentials));
        }
        String host = loopback.getHostAddress();
        JMXServiceURL url = new JMXServiceURL(
                "service:jmx:rmi://" + host + ":" + port + "/jndi/rmi://" + host + ":" + port + "/jmxrmi");
        JMXConnectorServer connector = JMXConnectorServerFactory.newJMXConnectorServer(url, env, server);
        connector.start();
        return connector;
    }

    public static void main(String[] args) throws Exception {
        if (args.length == 0 || args.length % 2 != 0) {
            System.err.println("usage: KafkaBeans PORT BEANS_FILE [PORT BEANS_FILE ...]");
            System.exit(2);
        }
        System.setProperty("java.rmi.server.hostname", InetAddress.getLoopbackAddress().getHostAddress());
        List<JMXConnectorServer> connectors = new ArrayList<>();
        for (int i = 0; i < args.length; i += 2) {
            connectors.add(serve(Integer.parseInt(args[i]), load(Path.of(args[i + 1]))));
        }
        System.out.println("kafka-beans ready: " + connectors.size() + " endpoints");
        System.out.flush();
        Thread.currentThread().join(); // serve until stopped
    }
}
