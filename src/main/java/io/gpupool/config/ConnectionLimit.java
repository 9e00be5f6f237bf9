package io.gpupool.config;

import java.nio.charset.StandardCharsets;
import java.util.concurrent.atomic.AtomicInteger;

import io.netty.buffer.Unpooled;
import io.netty.channel.ChannelFutureListener;
import io.netty.channel.ChannelHandler;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInboundHandlerAdapter;
import io.netty.handler.codec.http.DefaultFullHttpResponse;
import io.netty.handler.codec.http.FullHttpResponse;
import io.netty.handler.codec.http.HttpHeaderNames;
import io.netty.handler.codec.http.HttpHeaderValues;
import io.netty.handler.codec.http.HttpResponseStatus;
import io.netty.handler.codec.http.HttpVersion;
import io.netty.util.AttributeKey;

/**
 * Holds one server's open connections to a maximum: a connection beyond it is answered
 * {@code 503 Service Unavailable} with {@code Retry-After} and closed at once, before anything of its
 * request is read. Shared by all connections of one server, whose event loops set connections up
 * concurrently.
 *
 * <p>Each connection is admitted or refused exactly once, when it is set up, by one compare-and-set
 * on the count of admitted connections: a connection may only take a free slot, so the count never
 * exceeds the maximum, not even for a moment, and a refused connection holds no slot. The decision is
 * kept on the connection and only carried out later (the refusal is written once the socket is
 * active); the count is never read a second time, because by then connections being set up on other
 * event loops have moved it, and a second reading would refuse an admitted connection or admit a
 * refused one. An admitted connection gives its slot back when it closes, whatever happens between.
 */
@ChannelHandler.Sharable
final class ConnectionLimit extends ChannelInboundHandlerAdapter {

    private static final byte[] REFUSAL = rawResponse("503 Service Unavailable\r\nRetry-After: 1",
            "too many connections; try again shortly");

    /** Set on a connection that was refused: the refusal is still to be written ({@code false}) or was written. */
    private static final AttributeKey<Boolean> REFUSED = AttributeKey.valueOf(ConnectionLimit.class, "refused");

    private final int max;
    private final AtomicInteger open = new AtomicInteger();

    ConnectionLimit(int max) {
        this.max = max;
    }

    @Override
    public void handlerAdded(ChannelHandlerContext ctx) {
        if (admit()) {
            ctx.channel().closeFuture().addListener(closed -> open.decrementAndGet());
            return;
        }
        ctx.channel().attr(REFUSED).set(Boolean.FALSE);
        // Added to a connection that is already active, this handler may see no channelActive: refuse now.
        if (ctx.channel().isActive()) {
            refuse(ctx);
        }
    }

    /** A refused connection's activation goes no further than this handler: nothing above it sees the connection. */
    @Override
    public void channelActive(ChannelHandlerContext ctx) {
        if (ctx.channel().hasAttr(REFUSED)) {
            refuse(ctx);
            return;
        }
        ctx.fireChannelActive();
    }

    /** Takes a slot if one is free. */
    private boolean admit() {
        for (int n = open.get(); n < max; n = open.get()) {
            if (open.compareAndSet(n, n + 1)) {
                return true;
            }
        }
        return false;
    }

    /** Writes the refusal once (on a registered, open socket) and closes; reads nothing of the request. */
    private static void refuse(ChannelHandlerContext ctx) {
        Boolean written = ctx.channel().attr(REFUSED).getAndSet(Boolean.TRUE);
        if (Boolean.TRUE.equals(written)) {
            return;
        }
        ctx.channel().config().setAutoRead(false);
        ctx.writeAndFlush(Unpooled.wrappedBuffer(REFUSAL)).addListener(ChannelFutureListener.CLOSE);
    }

    /** A whole HTTP/1.1 response that closes the connection, written below the HTTP codec. */
    static byte[] rawResponse(String statusAndHeaders, String error) {
        String body = errorJson(error);
        return ("HTTP/1.1 " + statusAndHeaders + "\r\nContent-Type: application/json\r\nContent-Length: "
                + body.length() + "\r\nConnection: close\r\n\r\n" + body).getBytes(StandardCharsets.US_ASCII);
    }

    /** The same response, for a handler above the HTTP codec, which encodes it. */
    static FullHttpResponse closingResponse(HttpResponseStatus status, String error) {
        byte[] body = errorJson(error).getBytes(StandardCharsets.UTF_8);
        FullHttpResponse response = new DefaultFullHttpResponse(HttpVersion.HTTP_1_1, status,
                Unpooled.wrappedBuffer(body));
        response.headers().set(HttpHeaderNames.CONTENT_TYPE, "application/json")
                .setInt(HttpHeaderNames.CONTENT_LENGTH, body.length)
                .set(HttpHeaderNames.CONNECTION, HttpHeaderValues.CLOSE);
        return response;
    }

    /** The JSON error body every refusal of this server carries; {@code error} holds no quote or backslash. */
    static String errorJson(String error) {
        return "{\"error\":\"" + error + "\"}\n";
    }

    /** A client-supplied or library message, kept to printable ASCII without quotes or backslashes, and short. */
    static String jsonSafe(String text) {
        StringBuilder safe = new StringBuilder();
        for (int i = 0; i < text.length() && safe.length() < 120; i++) {
            char c = text.charAt(i);
            safe.append(c >= 0x20 && c < 0x7f && c != '"' && c != '\\' ? c : '?');
        }
        return safe.toString();
    }

    int open() {
        return open.get();
    }
}
