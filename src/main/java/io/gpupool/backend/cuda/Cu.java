package io.gpupool.backend.cuda;

import io.gpupool.memory.OutOfDeviceMemoryException;
import jcuda.Pointer;
import jcuda.driver.CUdeviceptr;
import jcuda.driver.CUresult;

/**
 * Small helpers around JCuda: result checking and conversion between JCuda pointer objects and the
 * plain {@code long} addresses the rest of gpupool uses.
 *
 * <p>JCuda pointer objects keep their address in a protected field; {@link DevicePtr} and
 * {@link HostPtr} are subclasses that read it. Going the other way, a zero pointer plus a byte offset
 * of {@code address} is passed to the driver as {@code address} (JCuda adds the offset natively).
 */
final class Cu {

    private static final CUdeviceptr NULL_DEVICE = new CUdeviceptr();
    private static final Pointer NULL_HOST = new Pointer();

    private Cu() {
    }

    /** An output parameter for device pointers (cuMemAlloc & co.) whose value can be read back. */
    static final class DevicePtr extends CUdeviceptr {
        long address() {
            return getNativePointer() + getByteOffset();
        }
    }

    /** An output parameter for host pointers (cuMemHostAlloc) whose value can be read back. */
    static final class HostPtr extends Pointer {
        long address() {
            return getNativePointer() + getByteOffset();
        }
    }

    /** A stream handle whose native value can be read, for libraries bound through FFM (cuBLASLt). */
    static final class StreamHandle extends jcuda.driver.CUstream {
        long address() {
            return getNativePointer();
        }
    }

    static CUdeviceptr device(long address) {
        return NULL_DEVICE.withByteOffset(address);
    }

    static Pointer host(long address) {
        return NULL_HOST.withByteOffset(address);
    }

    /** Throws a {@link CudaDriverException} naming {@code call} unless {@code result} is CUDA_SUCCESS. */
    static void check(String call, int result) {
        if (result != CUresult.CUDA_SUCCESS) {
            throw new CudaDriverException(call, result, null);
        }
    }

    static void check(String call, int result, String detail) {
        if (result != CUresult.CUDA_SUCCESS) {
            throw new CudaDriverException(call, result, detail);
        }
    }

    /** Like {@link #check} but maps CUDA_ERROR_OUT_OF_MEMORY to {@link OutOfDeviceMemoryException}. */
    static void checkAlloc(String call, int result, long bytes, String who) {
        if (result == CUresult.CUDA_ERROR_OUT_OF_MEMORY) {
            throw new OutOfDeviceMemoryException(bytes, who + ": " + call + " of " + bytes
                    + " bytes failed: CUDA_ERROR_OUT_OF_MEMORY", new CudaDriverException(call, result, null));
        }
        check(call, result, bytes + " bytes for " + who);
    }
}
