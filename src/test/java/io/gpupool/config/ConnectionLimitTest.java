package io.gpupool.config;

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;

import io.netty.buffer.ByteBuf;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInboundHandlerAdapter;
import io.netty.channel.ChannelOutboundHandlerAdapter;
import io.netty.channel.ChannelPromise;
import io.netty.channel.embedded.EmbeddedChannel;
import org.junit.jupiter.api.Test;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * The connection limit's decisions as a server's event loops interleave them: connections are set up
 * (the handler added) and activated at different moments, and a refusal takes time to be written.
 */
class ConnectionLimitTest {

    /** Records whether the connection's activation reached the handlers after the limit. */
    static final class Activation extends ChannelInboundHandlerAdapter {
        boolean seen;

        @Override
        public void channelActive(ChannelHandlerContext ctx) {
            seen = true;
            ctx.fireChannelActive();
        }
    }

    /** Keeps what is written without sending it: a refusal still on its way to a slow client. */
    static final class SlowClient extends ChannelOutboundHandlerAdapter {
        final List<Object> written = new ArrayList<>();

        @Override
        public void write(ChannelHandlerContext ctx, Object msg, ChannelPromise promise) {
            written.add(msg);
        }

        @Override
        public void flush(ChannelHandlerContext ctx) {
        }
    }

    private static String text(Object written) {
        return ((ByteBuf) written).toString(StandardCharsets.US_ASCII);
    }

    @Test
    void aConnectionWithinTheLimitIsServedEvenIfOneBeyondItIsSetUpBeforeItsActivation() {
        ConnectionLimit limit = new ConnectionLimit(1);
        EmbeddedChannel first = new EmbeddedChannel();
        Activation activation = new Activation();
        first.pipeline().addLast(limit, activation); // set up, its activation still to come
        SlowClient slow = new SlowClient();
        EmbeddedChannel second = new EmbeddedChannel(slow);
        second.pipeline().addLast(limit);

        first.pipeline().fireChannelActive();

        assertThat(activation.seen).as("the first connection is served").isTrue();
        assertThat((Object) first.readOutbound()).as("the first connection gets no refusal").isNull();
        assertThat(first.isOpen()).isTrue();
        assertThat(slow.written).hasSize(1);
        assertThat(text(slow.written.getFirst())).startsWith("HTTP/1.1 503 Service Unavailable\r\n")
                .contains("Retry-After: 1", "Connection: close", "too many connections");
    }

    @Test
    void aRefusedConnectionIsRefusedOnceHoldsNoSlotAndReachesNothingAboveTheLimit() {
        ConnectionLimit limit = new ConnectionLimit(1);
        EmbeddedChannel served = new EmbeddedChannel(limit);
        SlowClient slow = new SlowClient();
        Activation activation = new Activation();
        EmbeddedChannel refused = new EmbeddedChannel(slow);
        refused.pipeline().addLast(limit, activation);
        refused.pipeline().fireChannelActive(); // set up while active, then activated: still one refusal

        assertThat(slow.written).hasSize(1);
        assertThat(activation.seen).as("nothing above the limit sees the refused connection").isFalse();
        assertThat(refused.config().isAutoRead()).as("nothing of its request is read").isFalse();
        assertThat(limit.open()).as("the refused connection, still closing, holds no slot").isEqualTo(1);

        served.close();
        EmbeddedChannel next = new EmbeddedChannel(limit);
        assertThat((Object) next.readOutbound()).as("the slot is free again once the served connection closed").isNull();
        assertThat(limit.open()).isEqualTo(1);
    }
}
