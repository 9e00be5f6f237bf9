package io.gpupool.config;

import io.netty.handler.codec.http.HttpResponse;
import io.netty.handler.codec.http.HttpStatusClass;
import io.netty.handler.codec.http.LastHttpContent;

/**
 * Numbers a connection's final answers as their parts are written, for the handlers that must know which request an
 * answer belongs to under HTTP/1.1 pipelining (answers go out in request order). An informational answer (1xx, such
 * as 100 Continue) is no final answer: its head is not counted and its end ends nothing. A full response is both a
 * head and a last part: {@link #begins} then {@link #ends} on the same message.
 */
final class AnswerCount {

    private long begun;
    private long ended;

    /** Whether {@code msg} is the head of a final answer (then counted: {@link #begun()} is its number). */
    boolean begins(Object msg) {
        if (msg instanceof HttpResponse response && response.status().codeClass() != HttpStatusClass.INFORMATIONAL) {
            begun++;
            return true;
        }
        return false;
    }

    /** Whether {@code msg} is the last part of the final answer begun last (then {@link #ended()} is its number). */
    boolean ends(Object msg) {
        if (msg instanceof LastHttpContent && begun > ended) {
            ended = begun;
            return true;
        }
        return false;
    }

    /** Final answers whose head was written. */
    long begun() {
        return begun;
    }

    /** Final answers written to their last part. */
    long ended() {
        return ended;
    }
}
