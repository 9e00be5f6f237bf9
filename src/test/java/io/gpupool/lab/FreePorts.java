package io.gpupool.lab;

import java.io.IOException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.util.concurrent.ThreadLocalRandom;

/**
 * Loopback ports for the servers the tools start, taken below Linux's ephemeral range (32768-60999).
 * A port the kernel handed out as ephemeral ({@code new ServerSocket(0)}) can also be handed to an
 * outgoing connection: a client reconnecting to a dead server's port can then connect to itself (TCP
 * simultaneous open) and hold the port, so the server cannot bind it again.
 */
public final class FreePorts {

    public static final int LOWEST = 20000;
    public static final int HIGHEST = 32767;

    private FreePorts() {
    }

    /** A port in [{@value #LOWEST}, {@value #HIGHEST}] nothing listens on now (checked by binding it). */
    public static int pick() throws IOException {
        ThreadLocalRandom random = ThreadLocalRandom.current();
        for (int attempt = 0; attempt < 200; attempt++) {
            int port = random.nextInt(LOWEST, HIGHEST + 1);
            try (ServerSocket socket = new ServerSocket()) {
                socket.setReuseAddress(false);
                socket.bind(new InetSocketAddress(InetAddress.getLoopbackAddress(), port));
                return port;
            } catch (IOException taken) {
                // try another
            }
        }
        throw new IOException("no free loopback port in [" + LOWEST + ", " + HIGHEST + "] after 200 tries");
    }
}
