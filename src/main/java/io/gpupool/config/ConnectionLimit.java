package io.gpupool.config;

import java.nio.charset.StandardCharsets;
import java.util.concurrent.atomic.AtomicInteger;

import io.netty.buffer.Unpooled;
import io.netty.channel.ChannelFutureListener;
import io.netty.channel.ChannelHandler;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInboundHandlerAdapter;

/**
 * Holds one server's open connections to a maximum: a connection beyond it is answered
 * {@code 503 Service Unavailable} with {@code Retry-After} and closed at once, before anything of its
 * request is read. Shared by all connections of one server; the count is an atomic incremented when a
 * connection is set up and decremented when it closes.
 */
@ChannelHandler.Sharable
final class ConnectionLimit extends ChannelInboundHandlerAdapter {

    private static final byte[] REFUSAL = rawResponse("503 Service Unavailable\r\nRetry-After: 1",
            "too many connections; try again shortly");

    private final int max;
    private final AtomicInteger open = new AtomicInteger();

    ConnectionLimit(int max) {
        this.max = max;
    }

    /** Counted as soon as the connection is set up, uncounted when it closes, whatever happens between. */
    @Override
    public void handlerAdded(ChannelHandlerContext ctx) {
        open.incrementAndGet();
        ctx.channel().closeFuture().addListener(closed -> open.decrementAndGet());
        // Added to a connection that is already active, this handler sees no channelActive: decide now.
        if (ctx.channel().isActive()) {
            refuseIfOver(ctx);
        }
    }

    /** Refuses once the connection is active, so that the refusal is written on a registered, open socket. */
    @Override
    public void channelActive(ChannelHandlerContext ctx) {
        if (refuseIfOver(ctx)) {
            return;
        }
        ctx.fireChannelActive();
    }

    private boolean refuseIfOver(ChannelHandlerContext ctx) {
        if (open.get() <= max) {
            return false;
        }
        ctx.channel().config().setAutoRead(false);
        ctx.writeAndFlush(Unpooled.wrappedBuffer(REFUSAL)).addListener(ChannelFutureListener.CLOSE);
        return true;
    }

    /** A whole HTTP/1.1 response that closes the connection, written below the HTTP codec. */
    static byte[] rawResponse(String statusAndHeaders, String error) {
        String body = "{\"error\":\"" + error + "\"}\n";
        return ("HTTP/1.1 " + statusAndHeaders + "\r\nContent-Type: application/json\r\nContent-Length: "
                + body.length() + "\r\nConnection: close\r\n\r\n" + body).getBytes(StandardCharsets.US_ASCII);
    }

    int open() {
        return open.get();
    }
}
