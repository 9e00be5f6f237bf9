package io.gpupool.config;

import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.Locale;

import io.netty.buffer.Unpooled;
import io.netty.channel.ChannelFutureListener;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInboundHandlerAdapter;
import io.netty.handler.codec.http.DefaultFullHttpResponse;
import io.netty.handler.codec.http.FullHttpResponse;
import io.netty.handler.codec.http.HttpHeaderNames;
import io.netty.handler.codec.http.HttpHeaderValues;
import io.netty.handler.codec.http.HttpRequest;
import io.netty.handler.codec.http.HttpResponseStatus;
import io.netty.handler.codec.http.HttpVersion;
import io.netty.util.ReferenceCountUtil;

/**
 * Refuses requests whose framing a proxy in front could read differently from us (the ground of request
 * smuggling), with 400 and a closed connection, before any handler sees them (RFC 9112):
 * <ul>
 *   <li>a {@code Transfer-Encoding} whose final coding is not {@code chunked} (§6.3: the length cannot be
 *       determined, whatever {@code Content-Length} says);</li>
 *   <li>an HTTP/1.1 request without exactly one {@code Host} header (§3.2).</li>
 * </ul>
 * After a refusal the rest of that request is dropped until the connection closes.
 */
final class RequestFraming extends ChannelInboundHandlerAdapter {

    private boolean refused;

    @Override
    public void channelRead(ChannelHandlerContext ctx, Object msg) {
        if (refused) {
            ReferenceCountUtil.release(msg);
            return;
        }
        if (msg instanceof HttpRequest request) {
            String problem = problem(request);
            if (problem != null) {
                refused = true;
                ReferenceCountUtil.release(msg);
                ctx.channel().config().setAutoRead(false);
                ctx.writeAndFlush(badRequest(problem)).addListener(ChannelFutureListener.CLOSE);
                return;
            }
        }
        ctx.fireChannelRead(msg);
    }

    static String problem(HttpRequest request) {
        List<String> codings = request.headers().getAll(HttpHeaderNames.TRANSFER_ENCODING);
        if (!codings.isEmpty()) {
            String all = String.join(",", codings);
            String[] parts = all.split(",");
            String last = parts[parts.length - 1].trim().toLowerCase(Locale.ROOT);
            if (!last.equals(HttpHeaderValues.CHUNKED.toString())) {
                return "Transfer-Encoding must end in chunked (RFC 9112 section 6.3); this server decodes no "
                        + "other transfer coding (use Content-Encoding for a compressed body)";
            }
        }
        if (request.protocolVersion().equals(HttpVersion.HTTP_1_1)) {
            int hosts = request.headers().getAll(HttpHeaderNames.HOST).size();
            if (hosts != 1) {
                return "an HTTP/1.1 request needs exactly one Host header (RFC 9112 section 3.2), this one has " + hosts;
            }
        }
        return null;
    }

    private static FullHttpResponse badRequest(String problem) {
        byte[] body = ("{\"error\":\"" + problem + "\"}\n").getBytes(StandardCharsets.UTF_8);
        FullHttpResponse response = new DefaultFullHttpResponse(HttpVersion.HTTP_1_1, HttpResponseStatus.BAD_REQUEST,
                Unpooled.wrappedBuffer(body));
        response.headers().set(HttpHeaderNames.CONTENT_TYPE, "application/json")
                .setInt(HttpHeaderNames.CONTENT_LENGTH, body.length)
                .set(HttpHeaderNames.CONNECTION, HttpHeaderValues.CLOSE);
        return response;
    }
}
