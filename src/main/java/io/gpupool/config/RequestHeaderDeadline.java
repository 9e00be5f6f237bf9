package io.gpupool.config;

import java.time.Duration;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.TimeUnit;

import io.netty.buffer.ByteBuf;
import io.netty.buffer.Unpooled;
import io.netty.channel.ChannelDuplexHandler;
import io.netty.channel.ChannelFutureListener;
import io.netty.channel.ChannelHandler;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInboundHandlerAdapter;
import io.netty.channel.ChannelPromise;
import io.netty.handler.codec.http.HttpRequest;
import io.netty.handler.codec.http.LastHttpContent;

/**
 * The request line and headers must arrive within a deadline from their first byte, else the
 * connection gets {@code 408 Request Timeout} and is closed. An idle timeout alone does not catch a client
 * that sends one header byte every few seconds: each byte makes the connection look active.
 *
 * <p>One instance per connection, as two handlers around the HTTP codec, all on the connection's
 * event loop (so the state needs no synchronisation):
 * <pre>
 *   bytes():    before the codec; the first bytes while WAITING arm the deadline  -&gt; HEADERS
 *   requests(): after the codec; a decoded request cancels it                     -&gt; IN_REQUEST
 *               the last part of the response written                             -&gt; WAITING
 * </pre>
 * While WAITING with no bytes at all, the idle timeout applies instead.
 */
final class RequestHeaderDeadline {

    private static final byte[] TIMED_OUT = ConnectionLimit.rawResponse("408 Request Timeout",
            "request headers did not arrive in time");

    private enum State { WAITING, HEADERS, IN_REQUEST }

    private final long timeoutNanos;
    private State state = State.WAITING;
    private ScheduledFuture<?> deadline;

    RequestHeaderDeadline(Duration timeout) {
        this.timeoutNanos = timeout.toNanos();
    }

    ChannelHandler bytes() {
        return new ChannelInboundHandlerAdapter() {
            @Override
            public void channelRead(ChannelHandlerContext ctx, Object msg) {
                if (state == State.WAITING && msg instanceof ByteBuf buffer && buffer.isReadable()) {
                    state = State.HEADERS;
                    deadline = ctx.executor().schedule(() -> expire(ctx), timeoutNanos, TimeUnit.NANOSECONDS);
                }
                ctx.fireChannelRead(msg);
            }

            @Override
            public void channelInactive(ChannelHandlerContext ctx) {
                cancel();
                ctx.fireChannelInactive();
            }
        };
    }

    ChannelHandler requests() {
        return new ChannelDuplexHandler() {
            @Override
            public void channelRead(ChannelHandlerContext ctx, Object msg) {
                if (msg instanceof HttpRequest) {
                    cancel();
                    state = State.IN_REQUEST;
                }
                ctx.fireChannelRead(msg);
            }

            @Override
            public void write(ChannelHandlerContext ctx, Object msg, ChannelPromise promise) {
                if (msg instanceof LastHttpContent && state == State.IN_REQUEST) {
                    state = State.WAITING;
                }
                ctx.write(msg, promise);
            }
        };
    }

    private void expire(ChannelHandlerContext bytesContext) {
        if (state != State.HEADERS || !bytesContext.channel().isActive()) {
            return;
        }
        bytesContext.writeAndFlush(Unpooled.wrappedBuffer(TIMED_OUT)).addListener(ChannelFutureListener.CLOSE);
    }

    private void cancel() {
        if (deadline != null) {
            deadline.cancel(false);
            deadline = null;
        }
    }
}
