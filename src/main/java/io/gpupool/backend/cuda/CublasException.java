package io.gpupool.backend.cuda;

/** A cuBLASLt call failed; the message names the call, the status name and number, and what was asked. */
public final class CublasException extends RuntimeException {

    private final String call;
    private final int status;

    CublasException(String call, int status, String statusName, String detail) {
        super(call + " failed: " + statusName + " (" + status + ")" + (detail == null ? "" : ": " + detail));
        this.call = call;
        this.status = status;
    }

    /** The library function that failed, e.g. {@code cublasLtMatmul}. */
    public String call() {
        return call;
    }

    /** The raw cublasStatus_t value. */
    public int status() {
        return status;
    }
}
