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
 * Two deadlines for a request body, both answered with {@code 408 Request Timeout} naming the property that
 * ran out, then the connection is closed:
 * <pre>
 *   body-read timeout   after the headers of a request that has a body, and after each part of it, the next
 *                       part must come within this (a stalled upload)
 *   request timeout     the whole body must have arrived within this from the headers (an upload trickled
 *                       slowly enough to pass the first rule for ever)
 * </pre>
 * Without this a stalled read surfaced inside whichever handler was reading (a dropped connection, an empty 200
 * or a 500, depending on the route), and reactor-netty's own whole-request timeout closed the connection with
 * no answer at all; here the answer is the same on every route, and the handler only sees its exchange
 * cancelled.
 *
 * <p>One instance per connection, after the HTTP codec, on the connection's event loop (the state needs no
 * synchronisation). One timer serves both deadlines: armed once per body, it checks the time of the last part
 * read and of the headers when it fires and, if neither ran out, re-arms for the nearer one, so a fast upload
 * costs one scheduled task, not one per part. If the response has already begun (a handler answered without
 * reading the body), the stalled connection is only closed: a second status line cannot follow the first.
 */
final class RequestBodyDeadline extends ChannelDuplexHandler {

    private final long partTimeoutNanos;
    private final String partTimeoutText;
    private final long bodyTimeoutNanos;
    private final String bodyTimeoutText;
    private ScheduledFuture<?> deadline;
    private long headersNanos;
    private long lastPartNanos;
    private boolean responseStarted;
    private boolean expired;

    /**
     * @param partTimeout the body-read timeout: the longest pause between two parts of a body
     * @param bodyTimeout the request timeout: the longest a whole body may take after its headers
     */
    RequestBodyDeadline(Duration partTimeout, Duration bodyTimeout) {
        this.partTimeoutNanos = partTimeout.toNanos();
        this.partTimeoutText = text(partTimeout);
        this.bodyTimeoutNanos = bodyTimeout.toNanos();
        this.bodyTimeoutText = text(bodyTimeout);
    }

    private static String text(Duration timeout) {
        return timeout.toMillis() % 1000 == 0 ? timeout.toSeconds() + "s" : timeout.toMillis() + "ms";
    }

    @Override
    public void channelRead(ChannelHandlerContext ctx, Object msg) {
        if (expired) {
            ReferenceCountUtil.release(msg);
            return;
        }
        if (msg instanceof HttpRequest request) {
            responseStarted = false;
            // a request the decoder failed on has no body to wait for (RequestFraming answers it or reactor-netty
            // does), and its length header may be what failed
            if (!(msg instanceof LastHttpContent) && request.decoderResult().isSuccess() && hasBody(request)) {
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
        headersNanos = System.nanoTime();
        lastPartNanos = headersNanos;
        deadline = ctx.executor().schedule(() -> check(ctx), Math.min(partTimeoutNanos, bodyTimeoutNanos),
                TimeUnit.NANOSECONDS);
    }

    private void check(ChannelHandlerContext ctx) {
        if (deadline == null || !ctx.channel().isActive()) {
            return;
        }
        long now = System.nanoTime();
        long partLeft = partTimeoutNanos - (now - lastPartNanos);
        long bodyLeft = bodyTimeoutNanos - (now - headersNanos);
        if (partLeft > 0 && bodyLeft > 0) {
            deadline = ctx.executor().schedule(() -> check(ctx), Math.min(partLeft, bodyLeft), TimeUnit.NANOSECONDS);
            return;
        }
        deadline = null;
        expired = true;
        ctx.channel().config().setAutoRead(false);
        if (responseStarted) {
            ctx.close();
        } else {
            String error = bodyLeft <= 0 ? bodyTooSlowError() : bodyStalledError();
            ctx.writeAndFlush(ConnectionLimit.closingResponse(HttpResponseStatus.REQUEST_TIMEOUT, error))
                    .addListener(ChannelFutureListener.CLOSE);
        }
    }

    private String bodyStalledError() {
        return "the request body stopped arriving: no part of it for " + partTimeoutText
                + " (gpupool.server.body-read-timeout); send the whole body its headers announce";
    }

    private String bodyTooSlowError() {
        return "the request body did not arrive within " + bodyTimeoutText
                + " of its headers (gpupool.server.request-timeout); send it faster or in a smaller request";
    }

    private void cancel() {
        if (deadline != null) {
            deadline.cancel(false);
            deadline = null;
        }
    }
}
