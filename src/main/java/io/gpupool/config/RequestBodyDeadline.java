package io.gpupool.config;

import java.time.Duration;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.TimeUnit;

import io.netty.channel.ChannelDuplexHandler;
import io.netty.channel.ChannelFutureListener;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelPromise;
import io.netty.handler.codec.http.HttpContent;
import io.netty.handler.codec.http.HttpRequest;
import io.netty.handler.codec.http.HttpResponse;
import io.netty.handler.codec.http.HttpResponseStatus;
import io.netty.handler.codec.http.HttpUtil;
import io.netty.handler.codec.http.LastHttpContent;
import io.netty.util.ReferenceCountUtil;

/**
 * A request body must keep arriving: after the headers of a request that has a body, and after each part
 * of it, the next part must come within the body-read timeout, else the client gets
 * {@code 408 Request Timeout} naming the timeout and the connection is closed. Without this the stalled
 * read surfaced inside whichever handler was reading (a dropped connection, an empty 200 or a 500,
 * depending on the route); here the answer is the same on every route, and the handler only sees its
 * exchange cancelled.
 *
 * <p>One instance per connection, after the HTTP codec, on the connection's event loop (the state needs no
 * synchronisation). The deadline is armed once per body and checked against the time of the last part read
 * when it fires (re-armed for the rest), so a fast upload costs one scheduled task, not one per part. If
 * the response has already begun (a handler answered without reading the body), the stalled connection is
 * only closed: a second status line cannot follow the first.
 */
final class RequestBodyDeadline extends ChannelDuplexHandler {

    private final long timeoutNanos;
    private final String timeoutText;
    private ScheduledFuture<?> deadline;
    private long lastPartNanos;
    private boolean responseStarted;
    private boolean expired;

    RequestBodyDeadline(Duration timeout) {
        this.timeoutNanos = timeout.toNanos();
        this.timeoutText = timeout.toMillis() % 1000 == 0 ? timeout.toSeconds() + "s" : timeout.toMillis() + "ms";
    }

    @Override
    public void channelRead(ChannelHandlerContext ctx, Object msg) {
        if (expired) {
            ReferenceCountUtil.release(msg);
            return;
        }
        if (msg instanceof HttpRequest request) {
            responseStarted = false;
            if (!(msg instanceof LastHttpContent) && hasBody(request)) {
                arm(ctx);
            }
        } else if (msg instanceof LastHttpContent) {
            cancel();
        } else if (msg instanceof HttpContent) {
            lastPartNanos = System.nanoTime();
        }
        ctx.fireChannelRead(msg);
    }

    private static boolean hasBody(HttpRequest request) {
        return HttpUtil.isTransferEncodingChunked(request) || HttpUtil.getContentLength(request, 0L) > 0;
    }

    @Override
    public void write(ChannelHandlerContext ctx, Object msg, ChannelPromise promise) {
        if (msg instanceof HttpResponse) {
            responseStarted = true;
        }
        ctx.write(msg, promise);
    }

    @Override
    public void channelInactive(ChannelHandlerContext ctx) {
        cancel();
        ctx.fireChannelInactive();
    }

    private void arm(ChannelHandlerContext ctx) {
        cancel();
        lastPartNanos = System.nanoTime();
        deadline = ctx.executor().schedule(() -> check(ctx), timeoutNanos, TimeUnit.NANOSECONDS);
    }

    private void check(ChannelHandlerContext ctx) {
        if (deadline == null || !ctx.channel().isActive()) {
            return;
        }
        long quietNanos = System.nanoTime() - lastPartNanos;
        if (quietNanos < timeoutNanos) {
            deadline = ctx.executor().schedule(() -> check(ctx), timeoutNanos - quietNanos, TimeUnit.NANOSECONDS);
            return;
        }
        deadline = null;
        expired = true;
        ctx.channel().config().setAutoRead(false);
        if (responseStarted) {
            ctx.close();
        } else {
            ctx.writeAndFlush(ConnectionLimit.closingResponse(HttpResponseStatus.REQUEST_TIMEOUT, timedOutError()))
                    .addListener(ChannelFutureListener.CLOSE);
        }
    }

    private String timedOutError() {
        return "the request body stopped arriving: no part of it for " + timeoutText
                + " (gpupool.server.body-read-timeout); send the whole body its headers announce";
    }

    private void cancel() {
        if (deadline != null) {
            deadline.cancel(false);
            deadline = null;
        }
    }
}
