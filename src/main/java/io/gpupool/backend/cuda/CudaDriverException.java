package io.gpupool.backend.cuda;

import jcuda.driver.CUresult;

/** A CUDA driver call failed; the message names the call, the CUresult name and what was asked. */
public final class CudaDriverException extends RuntimeException {

    private final String call;
    private final int result;

    public CudaDriverException(String call, int result, String detail) {
        super(call + " failed: " + resultName(result) + " (" + result + ")" + (detail == null ? "" : ": " + detail));
        this.call = call;
        this.result = result;
    }

    /** The driver function that failed, e.g. {@code cuMemAlloc}. */
    public String call() {
        return call;
    }

    /** The raw CUresult value. */
    public int result() {
        return result;
    }

    static String resultName(int result) {
        try {
            return CUresult.stringFor(result);
        } catch (RuntimeException | LinkageError e) {
            return "CUresult " + result;
        }
    }
}
