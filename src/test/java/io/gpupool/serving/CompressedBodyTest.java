package io.gpupool.serving;

import org.junit.jupiter.api.Test;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.zip.Deflater;
import java.util.zip.DeflaterOutputStream;
import java.util.zip.GZIPOutputStream;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

class CompressedBodyTest {

    private static final byte[] JSON = "{\"inputs\":[{\"name\":\"x\",\"shape\":[2],\"datatype\":\"FP32\",\"data\":[1,2]}]}"
            .getBytes(StandardCharsets.UTF_8);

    @Test
    void gzipDeflateAndRawDeflateBodiesInflate() throws IOException {
        assertThat(CompressedBody.gunzip(gzip(JSON), 1 << 20)).isEqualTo(JSON);
        assertThat(CompressedBody.inflate(zlib(JSON), 1 << 20)).isEqualTo(JSON);
        assertThat(CompressedBody.inflate(rawDeflate(JSON), 1 << 20)).isEqualTo(JSON);
    }

    @Test
    void concatenatedGzipMembersAreOneBody() throws IOException {
        byte[] first = gzip(Arrays.copyOf(JSON, 10));
        byte[] second = gzip(Arrays.copyOfRange(JSON, 10, JSON.length));
        assertThat(CompressedBody.gunzip(concat(first, second), 1 << 20)).isEqualTo(JSON);
    }

    @Test
    void bytesAfterTheLastGzipMemberAreRefusedWithTheirCount() throws IOException {
        byte[] body = concat(gzip(JSON), "garbage".getBytes(StandardCharsets.US_ASCII));
        assertThatThrownBy(() -> CompressedBody.gunzip(body, 1 << 20))
                .isInstanceOfSatisfying(ServingException.class, e -> assertThat(e.status()).isEqualTo(400))
                .hasMessageContaining("not valid gzip data").hasMessageContaining("7 byte(s) follow the last gzip member");
    }

    @Test
    void bytesAfterTheEndOfDeflateDataAreRefused() throws IOException {
        for (byte[] compressed : new byte[][]{zlib(JSON), rawDeflate(JSON)}) {
            byte[] body = concat(compressed, new byte[]{1, 2, 3});
            assertThatThrownBy(() -> CompressedBody.inflate(body, 1 << 20))
                    .isInstanceOf(ServingException.class)
                    .hasMessageContaining("not valid deflate data").hasMessageContaining("3 byte(s) follow the end");
        }
    }

    @Test
    void cutShortCorruptOrForeignDataIsABadRequest() throws IOException {
        byte[] gz = gzip(JSON);
        byte[] corrupt = gz.clone();
        corrupt[gz.length - 8] ^= 0x5A;                            // the CRC-32
        assertThatThrownBy(() -> CompressedBody.gunzip(corrupt, 1 << 20)).hasMessageContaining("CRC-32 mismatch");
        assertThatThrownBy(() -> CompressedBody.gunzip(Arrays.copyOf(gz, gz.length - 3), 1 << 20))
                .hasMessageContaining("trailer").hasMessageContaining("cut short");
        assertThatThrownBy(() -> CompressedBody.gunzip(Arrays.copyOf(gz, 20), 1 << 20)).hasMessageContaining("cut short");
        assertThatThrownBy(() -> CompressedBody.gunzip(JSON, 1 << 20)).hasMessageContaining("no gzip header");
        byte[] z = zlib(JSON);
        assertThatThrownBy(() -> CompressedBody.inflate(Arrays.copyOf(z, z.length / 2), 1 << 20))
                .isInstanceOf(ServingException.class).hasMessageContaining("not valid deflate data");
    }

    @Test
    void outputBeyondTheLimitIsPayloadTooLarge() throws IOException {
        byte[] zeros = new byte[4 << 20];
        assertThatThrownBy(() -> CompressedBody.gunzip(gzip(zeros), 1 << 20))
                .isInstanceOfSatisfying(ServingException.class, e -> assertThat(e.status()).isEqualTo(413));
        assertThatThrownBy(() -> CompressedBody.inflate(zlib(zeros), 1 << 20))
                .isInstanceOfSatisfying(ServingException.class, e -> assertThat(e.status()).isEqualTo(413));
    }

    static byte[] gzip(byte[] data) throws IOException {
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        try (GZIPOutputStream gz = new GZIPOutputStream(out)) {
            gz.write(data);
        }
        return out.toByteArray();
    }

    private static byte[] zlib(byte[] data) throws IOException {
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        try (DeflaterOutputStream z = new DeflaterOutputStream(out)) {
            z.write(data);
        }
        return out.toByteArray();
    }

    private static byte[] rawDeflate(byte[] data) throws IOException {
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        Deflater deflater = new Deflater(Deflater.DEFAULT_COMPRESSION, true);
        try (DeflaterOutputStream z = new DeflaterOutputStream(out, deflater)) {
            z.write(data);
        } finally {
            deflater.end();
        }
        return out.toByteArray();
    }

    private static byte[] concat(byte[] a, byte[] b) {
        byte[] both = Arrays.copyOf(a, a.length + b.length);
        System.arraycopy(b, 0, both, a.length, b.length);
        return both;
    }
}
