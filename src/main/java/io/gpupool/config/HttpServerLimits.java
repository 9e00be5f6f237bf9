package io.gpupool.config;


import io.gpupool.serving.DecodingBudget;
import io.netty.channel.ChannelPipeline;
import io.netty.handler.codec.http.HttpObjectDecoder;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.springframework.boot.context.properties.EnableConfigurationProperties;
import org.springframework.boot.reactor.netty.NettyServerCustomizer;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import reactor.netty.NettyPipeline;
import reactor.netty.http.server.HttpServer;

/**
 * Applies {@link ServerLimitsProperties} and the request-framing rules to every Netty server the
 * application starts (the API's here, the management port's through {@link ManagementServerLimits});
 * each server is customised once and gets its own connection count.
 *
 * <pre>
 *   socket -&gt; ConnectionLimit -&gt; RequestHeaderDeadline.bytes -&gt; HTTP codec
 *          -&gt; RequestHeaderDeadline.requests -&gt; RequestFraming -&gt; PipelinedClose -&gt; KeepAliveReadResume
 *          -&gt; RequestBodyDeadline
 *          -&gt; reactor-netty, WebFlux
 * </pre>
 * The codec is reactor-netty's, with Netty's RFC 9112 framing rules (see {@link RequestFraming}).
 * The idle timeout is reactor-netty's own ({@code idleTimeout}); the body-read and whole-body timeouts are
 * {@link RequestBodyDeadline}'s, which answers either with a 408 naming it on every route.
 */
@Configuration(proxyBeanMethods = false)
@EnableConfigurationProperties(ServerLimitsProperties.class)
public class HttpServerLimits {

    private static final Logger log = LoggerFactory.getLogger(HttpServerLimits.class);

    /** The application port's server; the management port's gets its own ({@link ManagementServerLimits}). */
    @Bean
    NettyServerCustomizer gpupoolServerLimits(ServerLimitsProperties limits) {
        return server -> customize(server, limits, false);
    }

    static HttpServer customize(HttpServer server, ServerLimitsProperties limits, boolean management) {
        RequestFraming.requireRfc9112Decoder(HttpObjectDecoder.RFC9112_TRANSFER_ENCODING);
        int maxConnections = management ? limits.managementMaxConnections() : limits.maxConnections();
        ConnectionLimit connections = new ConnectionLimit(maxConnections);
        log.debug("HTTP server limits ({}): {} connections, idle {}, headers {}, body reads {}, body {}",
                management ? "management" : "application", maxConnections,
                limits.idleTimeout(), limits.requestHeaderTimeout(), limits.bodyReadTimeout(), limits.requestTimeout());
        if (!KeepAliveReadResume.INSTANCE.active()) {
            log.warn("reactor-netty has no {}: kept-alive connections may stop reading after an exchange",
                    KeepAliveReadResume.TERMINATED_EVENT);
        }
        return server
                .idleTimeout(limits.idleTimeout())
                .doOnChannelInit((observer, channel, remote) -> {
                    ChannelPipeline pipeline = channel.pipeline();
                    if (pipeline.get(NettyPipeline.HttpCodec) == null || pipeline.get("gpupool.connectionLimit") != null) {
                        return; // not an HTTP/1.1 connection this server decodes itself, or limited already
                    }
                    pipeline.addFirst("gpupool.connectionLimit", connections);
                    RequestHeaderDeadline deadline = new RequestHeaderDeadline(limits.requestHeaderTimeout());
                    pipeline.addBefore(NettyPipeline.HttpCodec, "gpupool.headerDeadline.bytes", deadline.bytes());
                    pipeline.addAfter(NettyPipeline.HttpCodec, "gpupool.headerDeadline.requests", deadline.requests());
                    pipeline.addAfter("gpupool.headerDeadline.requests", "gpupool.requestFraming", new RequestFraming());
                    pipeline.addAfter("gpupool.requestFraming", "gpupool.bodyDeadline",
                            new RequestBodyDeadline(limits.bodyReadTimeout(), limits.requestTimeout()));
                    pipeline.addAfter("gpupool.requestFraming", "gpupool.keepAliveReadResume", KeepAliveReadResume.INSTANCE);
                    pipeline.addAfter("gpupool.requestFraming", "gpupool.pipelinedClose", new PipelinedClose());
                });
    }

    /** The inference API's decoding budget; it must hold at least one body of the largest size allowed. */
    static DecodingBudget decodingBudget(ServerLimitsProperties limits, long maxBodyBytes) {
        long budget = limits.maxDecodingBytes().toBytes();
        if (budget < maxBodyBytes) {
            throw new IllegalArgumentException("gpupool.server.max-decoding-bytes = " + limits.maxDecodingBytes()
                    + " is invalid; allowed: at least gpupool.serving.max-body-size (" + maxBodyBytes + "B)");
        }
        return new DecodingBudget(budget);
    }
}
