package io.gpupool.serving;

/**
 * How a value the client sent appears in an error message: whole when short, else its start and its
 * length, so that an answer never grows with the input (a 30 MB name must not come back as a 30 MB 400).
 */
public final class Shown {

    /** Characters of a client's value repeated in a message. */
    static final int MAX_SHOWN = 64;

    private Shown() {
    }

    public static String clip(String value) {
        if (value == null || value.length() <= MAX_SHOWN) {
            return value;
        }
        return value.substring(0, MAX_SHOWN) + "... (" + value.length() + " characters)";
    }
}
