import java.io.IOException;
import java.lang.instrument.Instrumentation;
import java.lang.management.ManagementFactory;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.rmi.registry.LocateRegistry;
import java.rmi.server.RMIServerSocketFactory;
import java.util.HashMap;
import java.util.Map;
import javax.management.remote.JMXConnectorServer;
import javax.management.remote.JMXConnectorServerFactory;
import javax.management.remote.JMXServiceURL;
import javax.management.remote.rmi.RMIConnectorServer;

/**
 * A Java agent serving the platform MBean server over JMX/RMI on one port of 127.0.0.1 only, as
 * {@code service:jmx:rmi:///jndi/rmi://127.0.0.1:PORT/jmxrmi} (the address every JMX client uses).
 *
 * <p>{@code -javaagent:loopback-jmx.jar=PORT} or {@code =PORT,PASSWORD_FILE,ACCESS_FILE} (the JDK's
 * jmxremote.password and jmxremote.access formats). The JDK's own agent ({@code
 * com.sun.management.jmxremote.port}) also opens a local connector on an ephemeral port of every address,
 * which no property moves; this one opens nothing else.
 */
public final class LoopbackJmx {
    private LoopbackJmx() {}

    public static void premain(String options, Instrumentation instrumentation) throws IOException {
        String[] parts = options.split(",");
        int port = Integer.parseInt(parts[0]);
        InetAddress loopback = InetAddress.getByName("127.0.0.1");
        RMIServerSocketFactory sockets = new Loopback(loopback);
        LocateRegistry.createRegistry(port, null, sockets); // the registry and the server share the port
        Map<String, Object> env = new HashMap<>();
        env.put(RMIConnectorServer.RMI_SERVER_SOCKET_FACTORY_ATTRIBUTE, sockets);
        if (parts.length == 3) {
            env.put("jmx.remote.x.password.file", parts[1]);
            env.put("jmx.remote.x.access.file", parts[2]);
        }
        String at = "127.0.0.1:" + port;
        JMXServiceURL url = new JMXServiceURL("service:jmx:rmi://" + at + "/jndi/rmi://" + at + "/jmxrmi");
        JMXConnectorServer server =
                JMXConnectorServerFactory.newJMXConnectorServer(
                        url, env, ManagementFactory.getPlatformMBeanServer());
        server.start();
    }

    /** Server sockets on one address; equal factories let RMI share one listening socket. */
    private record Loopback(InetAddress address) implements RMIServerSocketFactory {
        @Override
        public ServerSocket createServerSocket(int port) throws IOException {
            return new ServerSocket(port, 50, address);
        }
    }
}
