package io.gpupool.config;

import io.netty.channel.ChannelDuplexHandler;
import io.netty.channel.ChannelFutureListener;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelPromise;
import io.netty.handler.codec.http.HttpRequest;
import io.netty.handler.codec.http.HttpResponse;
import io.netty.handler.codec.http.HttpUtil;
import io.netty.handler.codec.http.LastHttpContent;
import io.netty.util.ReferenceCountUtil;

/**
 * Closes a connection after the answer to the pipelined request that asked for it, not before. reactor-netty
 * keeps one keep-alive flag per connection and sets it from each request as the request is read. A request
 * that arrives while an earlier one is still being answered (HTTP/1.1 pipelining) and says
 * {@code Connection: close} therefore turns the earlier answer into the connection's last: that answer carries
 * {@code connection: close}, the connection closes after it, and the request that asked is never answered.
 *
 * <pre>
 *   client:   POST a ─ GET b (Connection: close) ─ GET c          (one packet)
 *   without:  answer a + "connection: close", closed; b and c unanswered
 *   with:     b reaches reactor-netty as keep-alive; answer a, answer b + "connection: close", closed;
 *             c is dropped unread (RFC 9112 section 9.6: no request after the one that closes is served)
 * </pre>
 *
 * Rules, per connection (this handler sits between the codec and reactor-netty, so it sees each request before
 * reactor-netty does and each answer after reactor-netty wrote it):
 * <ol>
 *   <li>Requests and final answers are numbered in order (informational 1xx answers such as 100-continue are
 *       not final and not numbered); a request read while {@code answered < received} is pipelined.</li>
 *   <li>A pipelined request that does not keep the connection alive is passed on as keep-alive, and its number is
 *       remembered as the closing one; everything read after its last part is released unread.</li>
 *   <li>The closing request's answer gets {@code connection: close}, and the connection closes once its last
 *       part is written.</li>
 * </ol>
 * A request that asks to close when nothing is outstanding is left to reactor-netty, which handles it right.
 */
final class PipelinedClose extends ChannelDuplexHandler {

    private long received;
    private final AnswerCount answers = new AnswerCount();
    /** The number of the pipelined request that asked to close; 0 while none did. */
    private long closingRequest;
    /** Whether the closing request has been read whole: what follows is not served. */
    private boolean closingRequestRead;

    @Override
    public void channelRead(ChannelHandlerContext ctx, Object msg) {
        if (closingRequestRead) {
            ReferenceCountUtil.release(msg);
            return;
        }
        if (msg instanceof HttpRequest request) {
            received++;
            if (closingRequest == 0 && answers.ended() < received - 1 && !HttpUtil.isKeepAlive(request)) {
                closingRequest = received;
                HttpUtil.setKeepAlive(request, true);
            }
        }
        if (closingRequest != 0 && received == closingRequest && msg instanceof LastHttpContent) {
            closingRequestRead = true;
        }
        ctx.fireChannelRead(msg);
    }

    @Override
    public void write(ChannelHandlerContext ctx, Object msg, ChannelPromise promise) {
        if (answers.begins(msg) && answers.begun() == closingRequest) {
            HttpUtil.setKeepAlive((HttpResponse) msg, false);
        }
        if (answers.ends(msg) && answers.ended() == closingRequest) {
            ctx.write(msg, promise.unvoid()).addListener(ChannelFutureListener.CLOSE);
            return;
        }
        ctx.write(msg, promise);
    }
}
