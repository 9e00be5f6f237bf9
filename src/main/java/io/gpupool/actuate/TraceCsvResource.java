package io.gpupool.actuate;

import java.io.IOException;
import java.io.InputStream;

import org.springframework.core.io.AbstractResource;

/**
 * A recorded trace as the body of a download: the CSV is rendered while the response is written, in
 * small pieces, so a download of the whole recording costs a buffer rather than the whole text, and it
 * holds no lock of the allocator's. Its length is unknown up front (the response is chunked).
 */
final class TraceCsvResource extends AbstractResource {

    private final ManagedPool.TraceControl trace;
    private final boolean rawAddresses;
    private final String device;

    TraceCsvResource(String device, ManagedPool.TraceControl trace, boolean rawAddresses) {
        this.device = device;
        this.trace = trace;
        this.rawAddresses = rawAddresses;
    }

    @Override
    public InputStream getInputStream() {
        return trace.csv(rawAddresses);
    }

    @Override
    public boolean exists() {
        return true;
    }

    /** Unknown without rendering it all, which is what streaming avoids; Spring then sends it chunked. */
    @Override
    public long contentLength() throws IOException {
        throw new IOException("the length of a streamed trace is not known in advance");
    }

    @Override
    public String getFilename() {
        return device.replace(':', '-') + "-trace.csv";
    }

    @Override
    public String getDescription() {
        return "allocation trace of " + device;
    }

    /** The text at once, for tests and the non-web endpoint. */
    String text() throws IOException {
        try (InputStream in = getInputStream()) {
            return new String(in.readAllBytes(), java.nio.charset.StandardCharsets.UTF_8);
        }
    }
}
