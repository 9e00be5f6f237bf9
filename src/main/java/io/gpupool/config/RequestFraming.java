package io.gpupool.config;

import java.net.URI;
import java.net.URISyntaxException;
import java.util.List;
import java.util.Locale;
import java.util.regex.Pattern;

import io.gpupool.serving.Shown;
import io.netty.channel.ChannelFutureListener;
import io.netty.channel.ChannelDuplexHandler;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelPromise;
import io.netty.handler.codec.http.ContentLengthNotAllowedException;
import io.netty.handler.codec.http.HttpContent;
import io.netty.handler.codec.http.HttpHeaderNames;
import io.netty.handler.codec.http.HttpHeaderValues;
import io.netty.handler.codec.http.HttpRequest;
import io.netty.handler.codec.http.HttpResponseStatus;
import io.netty.handler.codec.http.HttpVersion;
import io.netty.handler.codec.http.TooLongHttpHeaderException;
import io.netty.handler.codec.http.TooLongHttpLineException;
import io.netty.handler.codec.http.TransferEncodingNotAllowedException;
import io.netty.util.ReferenceCountUtil;

/**
 * Refuses requests whose framing a proxy in front could read differently from us (the ground of request
 * smuggling), with 400 and a closed connection, before any handler sees them (RFC 9112):
 * <ul>
 *   <li>a {@code Transfer-Encoding} other than {@code chunked} alone (§6.3: without chunked last the length cannot
 *       be determined, whatever {@code Content-Length} says; §6.1: a coding before it this server does not decode,
 *       and would otherwise pass the still-encoded body on as if it were plain);</li>
 *   <li>a {@code Content-Length} that is not one decimal number (RFC 9110 §8.6): letters, a sign, an empty
 *       value, a list, two headers; the later readers (the body deadline, the decoder's length) would otherwise
 *       fail on it without an answer;</li>
 *   <li>{@code Transfer-Encoding} together with {@code Content-Length} (§6.3: a proxy framing by the length
 *       would read the rest of a chunked body as a second request), and {@code Transfer-Encoding} in an
 *       HTTP/1.0 request (§6.1);</li>
 *   <li>an HTTP/1.1 request without exactly one {@code Host} header (§3.2).</li>
 * </ul>
 * It also names a request target that is no valid URI (a {@code %} not followed by two hexadecimal digits, a
 * character RFC 3986 does not allow unencoded), which the web layer would refuse with an empty 400.
 * The second rule is the codec's: Netty's decoder in its RFC 9112 mode (on unless the system property
 * {@value #NETTY_RFC9112_PROPERTY} is false; {@link #requireRfc9112Decoder} refuses to start then) fails such a
 * request instead of dropping its {@code Content-Length}, and this handler answers that failure, naming the
 * rule, before reactor-netty would (with an empty 400 and a warning that echoes the client's headers).
 * A chunked body the decoder cannot frame is refused here too ({@link #refuseBody}), with the decoder's reason, and
 * so are headers or a request line beyond the decoder's limits (431, 414), which reactor-netty answers without a body.
 * After a refusal the rest of that request is dropped until the connection closes. A refused request pipelined
 * behind others still being answered (HTTP/1.1 pipelining) is answered after the last of them, so that each
 * answer reaches the request it belongs to; written at once, it would arrive where the client expects the
 * earlier answer, and the connection would close before that answer.
 */
final class RequestFraming extends ChannelDuplexHandler {

    private boolean refused;
    /** Requests passed on, and their answers: a refusal waits for the answers of those before it. */
    private long passedOn;
    private final AnswerCount answers = new AnswerCount();
    /** A refusal of a request pipelined behind others still being answered; sent once {@code deferredAfter} are. */
    private Refusal deferred;
    private long deferredAfter;

    /** Netty's switch for its decoder's RFC 9112 framing rules (read once, when the decoder class loads). */
    static final String NETTY_RFC9112_PROPERTY = "io.netty.handler.codec.http.rfc9112TransferEncoding";

    /**
     * Fails when Netty's decoder would serve a request with both {@code Transfer-Encoding} and
     * {@code Content-Length} (it then drops the length and reads the body chunked), since nothing after the
     * decoder can see that the length was there.
     */
    static void requireRfc9112Decoder(boolean decoderFollowsRfc9112) {
        if (!decoderFollowsRfc9112) {
            throw new IllegalStateException("-D" + NETTY_RFC9112_PROPERTY + "=false is not supported: it makes the "
                    + "HTTP decoder accept Transfer-Encoding together with Content-Length (request smuggling, RFC 9112 "
                    + "section 6.3); remove the property");
        }
    }

    @Override
    public void channelRead(ChannelHandlerContext ctx, Object msg) {
        if (refused) {
            ReferenceCountUtil.release(msg);
            return;
        }
        if (msg instanceof HttpRequest request) {
            Refusal refusal;
            if (request.decoderResult().isFailure()) {
                // the decoder stopped at the failing header: only a length it failed on is ours to name, as the
                // headers after it (a Host among them) were never read
                refusal = decoderProblem(request.decoderResult().cause());
                if (refusal == null) {
                    refusal = badRequest(lengthProblem(request));
                }
            } else {
                refusal = badRequest(problem(request));
            }
            if (refusal != null) {
                ReferenceCountUtil.release(msg);
                refuse(ctx, refusal, passedOn);
                return;
            }
            passedOn++;
        } else if (msg instanceof HttpContent content && content.decoderResult().isFailure()) {
            refuseBody(ctx, content);
            return;
        }
        ctx.fireChannelRead(msg);
    }

    /**
     * Stops reading and answers {@code refusal}, closing, once {@code after} requests have their answers written
     * (the requests passed on before the refused one): at once when they have.
     */
    private void refuse(ChannelHandlerContext ctx, Refusal refusal, long after) {
        refused = true;
        ctx.channel().config().setAutoRead(false);
        if (answers.ended() < after) {
            deferred = refusal;                                    // pipelined: the earlier answers go first
            deferredAfter = after;
        } else {
            answer(ctx, refusal);
        }
    }

    private static void answer(ChannelHandlerContext ctx, Refusal refusal) {
        ctx.writeAndFlush(ConnectionLimit.closingResponse(refusal.status(), refusal.error()))
                .addListener(ChannelFutureListener.CLOSE);
    }

    /** Counts the answers of the requests passed on, and sends a deferred refusal after the last of them. */
    @Override
    public void write(ChannelHandlerContext ctx, Object msg, ChannelPromise promise) {
        answers.begins(msg);
        boolean last = answers.ends(msg);
        ctx.write(msg, promise);
        if (last && deferred != null && answers.ended() >= deferredAfter) {
            Refusal refusal = deferred;
            deferred = null;
            answer(ctx, refusal);
        }
    }

    /**
     * A body the decoder could not frame (a chunk size that is not hexadecimal, a chunk line too long) fails after
     * the request's headers went on to the handlers. Passed on, reactor-netty would answer an empty 400 itself and
     * the handler, finding the response already sent, would be logged and counted as a 500, so that client garbage
     * would fire a server-error alert. Answered here, with the reason, and the connection closed, the handler sees
     * a client that went away: a cancellation.
     */
    private void refuseBody(ChannelHandlerContext ctx, HttpContent content) {
        Throwable cause = content.decoderResult().cause();
        ReferenceCountUtil.release(content);
        String reason = cause == null || cause.getMessage() == null ? cause == null ? "unknown" : cause.getClass().getSimpleName()
                : cause.getMessage();
        // this request was passed on: its answer follows those of the requests before it
        refuse(ctx, new Refusal(HttpResponseStatus.BAD_REQUEST, "the request body's chunked framing is malformed "
                + "(RFC 9112 section 7.1): " + ConnectionLimit.jsonSafe(reason)), passedOn - 1);
    }

    /** The status and message a refused request gets. */
    record Refusal(HttpResponseStatus status, String error) {
    }

    private static Refusal badRequest(String problem) {
        return problem == null ? null : new Refusal(HttpResponseStatus.BAD_REQUEST, problem);
    }

    /**
     * The answer to a request the decoder failed on: its framing rules (400), headers or a request line beyond the
     * decoder's limits (431, 414: reactor-netty would send those with an empty body); null for other failures
     * (reactor-netty answers those).
     */
    static Refusal decoderProblem(Throwable cause) {
        if (cause instanceof ContentLengthNotAllowedException) {
            return badRequest("Transfer-Encoding and Content-Length must not both be sent (RFC 9112 section 6.3); send one");
        }
        if (cause instanceof TransferEncodingNotAllowedException) {
            return badRequest("Transfer-Encoding is not allowed in an HTTP/1.0 request (RFC 9112 section 6.1); send "
                    + "Content-Length or use HTTP/1.1");
        }
        if (cause instanceof TooLongHttpHeaderException) {
            return new Refusal(HttpResponseStatus.REQUEST_HEADER_FIELDS_TOO_LARGE, "the request's headers are larger "
                    + "than this server accepts (server.max-http-request-header-size); send fewer or shorter headers");
        }
        if (cause instanceof TooLongHttpLineException) {
            return new Refusal(HttpResponseStatus.REQUEST_URI_TOO_LONG, "the request line is longer than this server "
                    + "accepts; shorten the path and query");
        }
        return null;
    }

    /**
     * A body length: digits only. Eighteen at most keeps it within a long for every reader after this one (the
     * body limits are far below); a list of equal values, which RFC 9110 lets a server take, is refused as well,
     * since a proxy in front might have framed by a different one.
     */
    private static final Pattern DECIMAL_LENGTH = Pattern.compile("[0-9]{1,18}");

    /** A client's header value in a message: quoted, clipped as every value a client sent, JSON-safe. */
    private static String shown(String value) {
        return "'" + ConnectionLimit.jsonSafe(Shown.clip(value)) + "'";
    }

    private static String lengthProblem(HttpRequest request) {
        List<String> lengths = request.headers().getAll(HttpHeaderNames.CONTENT_LENGTH);
        if (lengths.size() > 1 || lengths.size() == 1 && !DECIMAL_LENGTH.matcher(lengths.getFirst().trim()).matches()) {
            return "Content-Length must be one decimal number of at most 18 digits (RFC 9110 section 8.6), was "
                    + shown(String.join(", ", lengths));
        }
        return null;
    }

    static String problem(HttpRequest request) {
        String target = request.uri();
        try {
            new URI(target);                                       // as the web layer parses it; it answers an empty 400
        } catch (URISyntaxException e) {
            return "the request target is not a valid URI (RFC 3986): " + ConnectionLimit.jsonSafe(e.getReason())
                    + " at index " + e.getIndex() + "; percent-encode reserved and non-ASCII characters as %XX";
        }
        List<String> codings = request.headers().getAll(HttpHeaderNames.TRANSFER_ENCODING);
        if (!codings.isEmpty() && !(codings.size() == 1
                && codings.getFirst().trim().toLowerCase(Locale.ROOT).equals(HttpHeaderValues.CHUNKED.toString()))) {
            return "Transfer-Encoding must be chunked alone (RFC 9112 sections 6.1 and 6.3), was "
                    + shown(String.join(", ", codings)) + "; this server decodes no other transfer coding "
                    + "(use Content-Encoding for a compressed body)";
        }
        String length = lengthProblem(request);
        if (length != null) {
            return length;
        }
        if (request.protocolVersion().equals(HttpVersion.HTTP_1_1)) {
            int hosts = request.headers().getAll(HttpHeaderNames.HOST).size();
            if (hosts != 1) {
                return "an HTTP/1.1 request needs exactly one Host header (RFC 9112 section 3.2), this one has " + hosts;
            }
        }
        return null;
    }
}
