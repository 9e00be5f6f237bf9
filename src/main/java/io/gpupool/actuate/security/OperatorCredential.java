package io.gpupool.actuate.security;

import java.nio.charset.StandardCharsets;
import java.security.InvalidKeyException;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.security.SecureRandom;

import javax.crypto.Mac;
import javax.crypto.spec.SecretKeySpec;

/**
 * The one operator user name and password, checked in constant time.
 *
 * <p>Both the name and the password a client presents are keyed-hashed (HMAC-SHA256 with a key drawn
 * at start-up) and compared with {@link MessageDigest#isEqual}, and both comparisons always run: an
 * unknown user costs exactly what a wrong password costs, so timing tells nothing about which user names
 * exist. A password hash such as bcrypt would protect a stored hash against offline guessing, but
 * nothing is stored here (the password arrives from the environment on every start), and its ~65 ms of
 * CPU per attempt let any client slow inference by guessing; the keyed hash costs microseconds, and
 * guessing is bounded by {@link LoginThrottle} instead.
 */
public final class OperatorCredential {

    private static final String ALGORITHM = "HmacSHA256";

    private final String username;
    private final byte[] key;
    private final byte[] usernameDigest;
    private final byte[] passwordDigest;

    public OperatorCredential(String username, String password) {
        this.username = username;
        this.key = new byte[32];
        new SecureRandom().nextBytes(key);
        this.usernameDigest = digest(username);
        this.passwordDigest = digest(password);
    }

    public String username() {
        return username;
    }

    /** True when both match; takes the same time whichever of the two is wrong. */
    public boolean matches(String presentedUsername, String presentedPassword) {
        boolean user = MessageDigest.isEqual(usernameDigest, digest(presentedUsername == null ? "" : presentedUsername));
        boolean password = MessageDigest.isEqual(passwordDigest, digest(presentedPassword == null ? "" : presentedPassword));
        return user & password;
    }

    private byte[] digest(String value) {
        try {
            Mac mac = Mac.getInstance(ALGORITHM);
            mac.init(new SecretKeySpec(key, ALGORITHM));
            return mac.doFinal(value.getBytes(StandardCharsets.UTF_8));
        } catch (NoSuchAlgorithmException | InvalidKeyException e) {
            throw new IllegalStateException(ALGORITHM + " is part of every Java runtime", e);
        }
    }
}
