package io.gpupool.config;

import io.netty.channel.embedded.EmbeddedChannel;
import io.netty.handler.codec.http.DefaultFullHttpResponse;
import io.netty.handler.codec.http.DefaultHttpRequest;
import io.netty.handler.codec.http.DefaultHttpResponse;
import io.netty.handler.codec.http.FullHttpResponse;
import io.netty.handler.codec.http.HttpHeaderNames;
import io.netty.handler.codec.http.HttpMethod;
import io.netty.handler.codec.http.HttpRequest;
import io.netty.handler.codec.http.HttpResponse;
import io.netty.handler.codec.http.HttpResponseStatus;
import io.netty.handler.codec.http.HttpUtil;
import io.netty.handler.codec.http.HttpVersion;
import io.netty.handler.codec.http.LastHttpContent;
import org.junit.jupiter.api.Test;

import static org.assertj.core.api.Assertions.assertThat;

/** What reactor-netty sees of pipelined requests that ask to close, and when the connection closes. */
class PipelinedCloseTest {

    private static HttpRequest request(String uri, boolean keepAlive) {
        HttpRequest request = new DefaultHttpRequest(HttpVersion.HTTP_1_1, HttpMethod.GET, uri);
        HttpUtil.setKeepAlive(request, keepAlive);
        return request;
    }

    private static FullHttpResponse answer(HttpResponseStatus status) {
        FullHttpResponse response = new DefaultFullHttpResponse(HttpVersion.HTTP_1_1, status);
        response.headers().setInt(HttpHeaderNames.CONTENT_LENGTH, 0);
        return response;
    }

    @Test
    void aRequestAskingToCloseWithNothingOutstandingReachesTheServerUnchanged() {
        EmbeddedChannel channel = new EmbeddedChannel(new PipelinedClose());
        channel.writeInbound(request("/a", false), LastHttpContent.EMPTY_LAST_CONTENT);
        HttpRequest seen = channel.readInbound();
        assertThat(HttpUtil.isKeepAlive(seen)).isFalse();
        channel.finishAndReleaseAll();
    }

    @Test
    void aPipelinedCloseIsHonouredAfterItsOwnAnswerNotTheOneBeforeAndAContinueIsNoAnswer() {
        EmbeddedChannel channel = new EmbeddedChannel(new PipelinedClose());
        channel.writeInbound(request("/a", true), LastHttpContent.EMPTY_LAST_CONTENT,
                request("/b", false), LastHttpContent.EMPTY_LAST_CONTENT, request("/c", true));
        assertThat(((HttpRequest) channel.readInbound()).uri()).isEqualTo("/a");
        channel.readInbound();
        HttpRequest closing = channel.readInbound();
        assertThat(closing.uri()).isEqualTo("/b");
        assertThat(HttpUtil.isKeepAlive(closing)).as("passed on as keep-alive").isTrue();
        channel.readInbound();
        assertThat((Object) channel.readInbound()).as("the request after the closing one is not served").isNull();

        channel.writeOutbound(answer(HttpResponseStatus.CONTINUE));
        channel.writeOutbound(answer(HttpResponseStatus.OK));
        assertThat(channel.isOpen()).as("open after the first request's answer").isTrue();
        HttpResponse continued = channel.readOutbound();
        HttpResponse first = channel.readOutbound();
        assertThat(continued.status()).isEqualTo(HttpResponseStatus.CONTINUE);
        assertThat(HttpUtil.isKeepAlive(first)).isTrue();

        channel.writeOutbound(new DefaultHttpResponse(HttpVersion.HTTP_1_1, HttpResponseStatus.OK));
        assertThat(channel.isOpen()).as("open until the closing answer's last part").isTrue();
        channel.writeOutbound(LastHttpContent.EMPTY_LAST_CONTENT);
        HttpResponse second = channel.readOutbound();
        assertThat(HttpUtil.isKeepAlive(second)).as("the closing request's answer says close").isFalse();
        assertThat(channel.isOpen()).isFalse();
        channel.finishAndReleaseAll();
    }
}
