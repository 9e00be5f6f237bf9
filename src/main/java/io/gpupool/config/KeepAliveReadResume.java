package io.gpupool.config;

import io.netty.channel.ChannelHandler;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInboundHandlerAdapter;
import org.jspecify.annotations.Nullable;

/**
 * Keeps a kept-alive HTTP/1.1 connection reading after each exchange. reactor-netty reads a connection on
 * demand: its traffic handler asks for the next read when a request's operations terminate, unless it still
 * holds messages that arrived early (a request sent before the previous one's operations terminated, with its
 * trailing empty body part). It then drains those on a later event-loop task, and when that drain finds only
 * the trailing part, or nothing, it never asks for a read again: the connection stays open and the client's
 * next request is never read (reactor-netty issues 4347 and 4361). Keep-alive clients that send at once after
 * a response (tritonclient, WebClient's pool, python-requests sessions) hit it on a few requests in a thousand.
 *
 * <pre>
 *   operations terminate ─► traffic handler: queue empty? read : drain task queued
 *                      └──► this handler:   read task queued behind it
 * </pre>
 * The termination event passes this handler first (it sits between the codec and the traffic handler), so the
 * read it queues runs after the traffic handler's drain. A read asked for twice is one read: when the traffic
 * handler asked too, nothing changes; when the drain dispatched a request, the read brings its body or the next
 * request, which the traffic handler queues as it would a pipelined one.
 */
@ChannelHandler.Sharable
final class KeepAliveReadResume extends ChannelInboundHandlerAdapter {

    /** reactor-netty's event, fired through the pipeline when a request's operations terminated. */
    static final String TERMINATED_EVENT = "reactor.netty.http.server.HttpServerOperationsTerminatedEvent";

    /** The event's class, or null when this reactor-netty has none of that name (KeepAliveReadResumeTest fails then). */
    private static final @Nullable Class<?> TERMINATED = terminatedEventClass();

    static final KeepAliveReadResume INSTANCE = new KeepAliveReadResume();

    private KeepAliveReadResume() {
    }

    private static @Nullable Class<?> terminatedEventClass() {
        try {
            return Class.forName(TERMINATED_EVENT, false, KeepAliveReadResume.class.getClassLoader());
        } catch (ClassNotFoundException e) {
            return null;
        }
    }

    /** Whether this reactor-netty fires the event this handler waits for. */
    boolean active() {
        return TERMINATED != null;
    }

    @Override
    public void userEventTriggered(ChannelHandlerContext ctx, Object event) {
        ctx.fireUserEventTriggered(event);
        if (TERMINATED != null && TERMINATED.isInstance(event) && ctx.channel().isActive()) {
            ctx.executor().execute(ctx::read);
        }
    }
}
