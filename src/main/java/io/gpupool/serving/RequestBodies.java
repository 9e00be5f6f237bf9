package io.gpupool.serving;

import org.springframework.core.io.buffer.DataBuffer;
import org.springframework.core.io.buffer.DataBufferUtils;
import org.springframework.http.HttpHeaders;
import org.springframework.web.reactive.function.BodyExtractors;
import org.springframework.web.reactive.function.server.ServerRequest;
import reactor.core.publisher.Mono;
import reactor.core.scheduler.Schedulers;

import java.util.ArrayList;
import java.util.List;
import java.util.Locale;

/**
 * Reads a request body whole, within {@code gpupool.serving.max-body-size}, and undoes its
 * {@code Content-Encoding} ({@code gzip}, {@code deflate}, or none).
 *
 * <pre>
 *   bytes arriving ──► kept while total ≤ limit ─────────────────────────► end ──► decode ──► byte[]
 *                          │ total > limit                                        (inflated bytes
 *                          ▼                                                       also ≤ limit,
 *                      dropped as they arrive, reading goes on to the end ──► 413   else 413)
 *                          │ total > DRAIN_FACTOR × limit
 *                          ▼
 *                      413 at once (the connection closes under the client)
 * </pre>
 * A body declared over the limit by a client that waits for 100 Continue is refused before it is asked for.
 * Reading an over-limit body to its end before answering is what lets a client that writes its
 * whole body before reading (tritonclient, python-requests) see the 413 rather than a reset
 * connection; the dropped bytes cost no memory. A compressed body is inflated in steps into a
 * buffer that may never grow past the limit, so a small body that inflates to gigabytes (a zip bomb)
 * is refused after at most {@code limit} bytes of output.
 */
final class RequestBodies {

    /** How far past the limit a body is still read to its end (then dropped) to answer 413 cleanly. */
    static final int DRAIN_FACTOR = 4;

    private final int maxBodyBytes;

    RequestBodies(int maxBodyBytes) {
        this.maxBodyBytes = maxBodyBytes;
    }

    /** Reads a body nobody needs and drops it, within {@code maxBodyBytes} (413 beyond, as every body). */
    static Mono<Void> discard(ServerRequest request, int maxBodyBytes) {
        if (request.headers().contentLength().orElse(-1) > maxBodyBytes) {
            return Mono.error(ServingException.payloadTooLarge(maxBodyBytes));
        }
        long[] seen = {0};
        return request.body(BodyExtractors.toDataBuffers()).doOnNext(buffer -> {
            seen[0] += buffer.readableByteCount();
            DataBufferUtils.release(buffer);
            if (seen[0] > maxBodyBytes) {
                throw ServingException.payloadTooLarge(maxBodyBytes);
            }
        }).then();
    }

    /**
     * Whether the client waits for 100 Continue before sending its body (RFC 9110 section 10.1.1): then a declared
     * length over the limit is answered 413 before the body is asked for, and the client need not send it.
     */
    private static boolean asksToContinue(ServerRequest request) {
        return request.headers().header(HttpHeaders.EXPECT).stream().anyMatch(v -> v.equalsIgnoreCase("100-continue"));
    }

    /** The decoded body; empty array for no body. Fails with 413, 415 (unknown encoding) or 400 (corrupt data). */
    Mono<byte[]> read(ServerRequest request) {
        return read(request, null);
    }

    /**
     * {@link #read(ServerRequest)}, each part kept counted in {@code hold} (null: none) as it arrives; when a part
     * does not fit, the rest of the body is read and dropped (as beyond the limit) and the answer is the budget's 503.
     */
    Mono<byte[]> read(ServerRequest request, DecodingBudget.Hold hold) {
        String encoding = encoding(request.headers().firstHeader(HttpHeaders.CONTENT_ENCODING));
        long drainLimit = (long) DRAIN_FACTOR * maxBodyBytes;
        long declared = request.headers().contentLength().orElse(-1);
        if (declared > drainLimit || declared > maxBodyBytes && asksToContinue(request)) {
            return Mono.error(ServingException.payloadTooLarge(maxBodyBytes));   // before the body, or its 100 Continue
        }
        Mono<byte[]> raw = request.body(BodyExtractors.toDataBuffers())
                .reduceWith(() -> new Collected(hold), (collected, buffer) -> collected.add(buffer, maxBodyBytes, drainLimit))
                .doOnDiscard(DataBuffer.class, DataBufferUtils::release)
                .defaultIfEmpty(new Collected(null))
                .map(collected -> {
                    if (collected.refused && collected.total <= maxBodyBytes) {
                        throw hold.exhausted();
                    }
                    return collected.bytes(maxBodyBytes);
                });
        return switch (encoding) {
            case "identity" -> raw;
            case "gzip", "x-gzip" -> raw.publishOn(Schedulers.boundedElastic()).map(body -> inflate(body, true));
            case "deflate" -> raw.publishOn(Schedulers.boundedElastic()).map(body -> inflate(body, false));
            default -> raw.then(Mono.error(ServingException.unsupportedMediaType("Content-Encoding '" + encoding
                    + "' is not supported; send gzip, deflate or no encoding")));
        };
    }

    private static String encoding(String header) {
        if (header == null || header.isBlank()) {
            return "identity";
        }
        return header.trim().toLowerCase(Locale.ROOT);
    }

    /** Inflates {@code body} ({@link CompressedBody}), at most {@code maxBodyBytes} of output. */
    private byte[] inflate(byte[] body, boolean gzip) {
        if (body.length == 0) {
            return body;
        }
        return gzip ? CompressedBody.gunzip(body, maxBodyBytes) : CompressedBody.inflate(body, maxBodyBytes);
    }

    /** The bytes kept so far; once over the limit, or refused by the hold, nothing more is kept, only counted. */
    private static final class Collected {
        private final List<byte[]> parts = new ArrayList<>();
        private final DecodingBudget.Hold hold;
        private long total;
        private boolean refused;

        Collected(DecodingBudget.Hold hold) {
            this.hold = hold;
        }

        Collected add(DataBuffer buffer, int limit, long drainLimit) {
            try {
                int size = buffer.readableByteCount();
                total += size;
                if (total > drainLimit) {
                    clear();
                    throw ServingException.payloadTooLarge(limit);
                }
                if (total <= limit && !refused && hold != null && !hold.take(size)) {
                    refused = true;                                // drained from here on, answered 503 at the end
                }
                if (total <= limit && !refused) {
                    byte[] part = new byte[size];
                    buffer.read(part);
                    parts.add(part);
                } else {
                    parts.clear();
                }
                return this;
            } finally {
                DataBufferUtils.release(buffer);
            }
        }

        void clear() {
            parts.clear();
        }

        byte[] bytes(int limit) {
            if (total > limit) {
                throw ServingException.payloadTooLarge(limit);
            }
            byte[] out = new byte[(int) total];
            int at = 0;
            for (byte[] part : parts) {
                System.arraycopy(part, 0, out, at, part.length);
                at += part.length;
            }
            return out;
        }
    }
}
