package io.gpupool.serving;

import java.io.ByteArrayOutputStream;
import java.util.zip.CRC32;
import java.util.zip.DataFormatException;
import java.util.zip.Inflater;

/**
 * Inflates a request body sent with {@code Content-Encoding: gzip} or {@code deflate}, strictly: every byte of the
 * body must belong to the format, and the output may not pass a limit.
 *
 * <pre>
 *   gzip (RFC 1952)     member [member ...]      member = header | deflate data | CRC-32 | size mod 2^32
 *                       header = 1f 8b 08 FLG MTIME(4) XFL OS [EXTRA] [NAME\0] [COMMENT\0] [HCRC(2)]
 *   deflate (HTTP)      zlib stream (RFC 1950), or raw deflate data (RFC 1951), which some clients send
 * </pre>
 * {@code java.util.zip.GZIPInputStream} ends quietly at bytes after a member that do not start another one, and
 * {@code InflaterInputStream} at bytes after the end of the stream: a body with something appended (a second
 * document, a framing mistake of the client) would be served as if the rest were not there. Here they are a 400
 * naming how many bytes were left over. Members follow one another (concatenated gzip is valid); each one's CRC and
 * size are checked.
 */
final class CompressedBody {

    private static final int STEP = 64 * 1024;
    private static final int FHCRC = 0x02;
    private static final int FEXTRA = 0x04;
    private static final int FNAME = 0x08;
    private static final int FCOMMENT = 0x10;
    private static final int RESERVED_FLAGS = 0xE0;

    private final byte[] body;
    private final int maxBytes;
    private final String format;
    private final ByteArrayOutputStream out;
    private final byte[] step = new byte[STEP];

    private CompressedBody(byte[] body, int maxBytes, String format) {
        this.body = body;
        this.maxBytes = maxBytes;
        this.format = format;
        this.out = new ByteArrayOutputStream(Math.min(maxBytes, Math.max(256, body.length * 4)));
    }

    /** The inflated bytes of a gzip body (one member or several), at most {@code maxBytes}. */
    static byte[] gunzip(byte[] body, int maxBytes) {
        CompressedBody decoder = new CompressedBody(body, maxBytes, "gzip");
        int position = 0;
        do {
            position = decoder.member(position);
        } while (position < body.length);
        return decoder.out.toByteArray();
    }

    /** The inflated bytes of a deflate body (zlib or raw), at most {@code maxBytes}. */
    static byte[] inflate(byte[] body, int maxBytes) {
        CompressedBody decoder = new CompressedBody(body, maxBytes, "deflate");
        int end = decoder.deflateData(0, !zlibHeader(body), null);
        if (end < body.length) {
            throw decoder.invalid((body.length - end) + " byte(s) follow the end of the compressed data");
        }
        return decoder.out.toByteArray();
    }

    /** One gzip member from {@code at}; returns where the next one would start. */
    private int member(int at) {
        if (body.length - at < 18) {
            throw invalid(at == 0 ? "too short for a gzip header and trailer"
                    : (body.length - at) + " byte(s) follow the last gzip member");
        }
        if ((body[at] & 0xFF) != 0x1F || (body[at + 1] & 0xFF) != 0x8B) {
            throw invalid(at == 0 ? "no gzip header (magic bytes 1f 8b)"
                    : (body.length - at) + " byte(s) follow the last gzip member and do not start another");
        }
        if (body[at + 2] != 8) {
            throw invalid("compression method " + (body[at + 2] & 0xFF) + " (only 8, deflate, exists)");
        }
        int flags = body[at + 3] & 0xFF;
        if ((flags & RESERVED_FLAGS) != 0) {
            throw invalid("reserved header flags set (" + Integer.toHexString(flags) + ")");
        }
        int p = at + 10;
        if ((flags & FEXTRA) != 0) {
            p = within(p + 2 + (body[p] & 0xFF | (body[p + 1] & 0xFF) << 8));
        }
        if ((flags & FNAME) != 0) {
            p = afterZero(p);
        }
        if ((flags & FCOMMENT) != 0) {
            p = afterZero(p);
        }
        if ((flags & FHCRC) != 0) {
            p = within(p + 2);
        }
        CRC32 crc = new CRC32();
        long before = out.size();
        int end = deflateData(p, true, crc);
        if (body.length - end < 8) {
            throw invalid("the gzip trailer (CRC-32 and size) is cut short");
        }
        if ((int) crc.getValue() != littleEndianInt(end)) {
            throw invalid("CRC-32 mismatch: the data is corrupt");
        }
        if ((int) (out.size() - before) != littleEndianInt(end + 4)) {
            throw invalid("size in the trailer does not match the inflated data");
        }
        return end + 8;
    }

    /** Inflates the deflate data starting at {@code at} into {@link #out}; returns the index after its last byte. */
    private int deflateData(int at, boolean raw, CRC32 crc) {
        Inflater inflater = new Inflater(raw);
        try {
            inflater.setInput(body, at, body.length - at);
            while (!inflater.finished()) {
                int n = inflater.inflate(step);
                if (n == 0) {
                    if (inflater.needsDictionary()) {
                        throw invalid("the data needs a preset dictionary");
                    }
                    if (inflater.needsInput()) {
                        throw invalid("the compressed data is cut short");
                    }
                    continue;
                }
                if ((long) out.size() + n > maxBytes) {
                    throw ServingException.payloadTooLarge(maxBytes, "decompressed request body");
                }
                out.write(step, 0, n);
                if (crc != null) {
                    crc.update(step, 0, n);
                }
            }
            return body.length - inflater.getRemaining();
        } catch (DataFormatException e) {
            throw invalid(e.getMessage() == null ? "corrupt compressed data" : e.getMessage());
        } finally {
            inflater.end();
        }
    }

    private int within(int p) {
        if (p > body.length) {
            throw invalid("the gzip header is cut short");
        }
        return p;
    }

    private int afterZero(int p) {
        while (p < body.length && body[p] != 0) {
            p++;
        }
        return within(p + 1);
    }

    private int littleEndianInt(int p) {
        return body[p] & 0xFF | (body[p + 1] & 0xFF) << 8 | (body[p + 2] & 0xFF) << 16 | (body[p + 3] & 0xFF) << 24;
    }

    private ServingException invalid(String why) {
        return ServingException.badRequest("request body is not valid " + format + " data (Content-Encoding: "
                + format + "): " + why);
    }

    /** RFC 1950: compression method 8 in the low nibble of the first byte, and the two bytes a multiple of 31. */
    private static boolean zlibHeader(byte[] body) {
        return body.length >= 2 && (body[0] & 0x0F) == 8 && (((body[0] & 0xFF) << 8) | (body[1] & 0xFF)) % 31 == 0;
    }
}
