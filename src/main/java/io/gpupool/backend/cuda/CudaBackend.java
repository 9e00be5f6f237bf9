package io.gpupool.backend.cuda;

import io.gpupool.backend.ComputeBackend;
import io.gpupool.backend.ComputeDevice;
import jcuda.driver.CUdevice;
import jcuda.driver.JCudaDriver;

import java.util.ArrayList;
import java.util.List;
import java.util.Optional;

import static jcuda.driver.JCudaDriver.cuDeviceGet;
import static jcuda.driver.JCudaDriver.cuDeviceGetCount;
import static jcuda.driver.JCudaDriver.cuInit;

/**
 * CUDA GPUs through the JCuda 12.6 driver API (plus a small FFM binding to libcuda for what JCuda
 * lacks). {@link #tryCreate()} probes the machine and returns empty, with one log line saying why,
 * where there is no driver or no device; it never throws on a GPU-less machine.
 */
public final class CudaBackend implements ComputeBackend {

    private static final System.Logger LOG = System.getLogger(CudaBackend.class.getName());

    /**
     * Tunables of the backend.
     *
     * @param expandableSegments  whether {@code chunkSource()} reserves one virtual range and maps
     *                            chunks into it (else plain cuMemAlloc chunks)
     * @param expandableReserveBytes size of that virtual range; 0 means the device's memory size
     * @param stagingSlotBytes    size of one pinned staging buffer (a multiple of 256)
     * @param stagingSlotsPerChunk staging buffers pinned per cuMemHostAlloc call
     * @param stagingMaxSlots     bound on staging buffers per device
     * @param ffmLaunches         whether streams launch kernels through the FFM binding of cuLaunchKernel where it
     *                            can be made (the default), or always through JCuda (benchmarks compare the two)
     */
    public record Options(boolean expandableSegments, long expandableReserveBytes, long stagingSlotBytes,
                          int stagingSlotsPerChunk, int stagingMaxSlots, boolean ffmLaunches) {

        public Options {
            if (expandableReserveBytes < 0) {
                throw new IllegalArgumentException("expandableReserveBytes must be >= 0, got " + expandableReserveBytes);
            }
            if (stagingSlotBytes <= 0 || stagingSlotBytes % 256 != 0) {
                throw new IllegalArgumentException("stagingSlotBytes must be a positive multiple of 256, got "
                        + stagingSlotBytes);
            }
            if (stagingSlotsPerChunk <= 0 || stagingMaxSlots < stagingSlotsPerChunk) {
                throw new IllegalArgumentException("staging needs 0 < stagingSlotsPerChunk <= stagingMaxSlots, got "
                        + stagingSlotsPerChunk + " and " + stagingMaxSlots);
            }
        }

        /** Plain chunks; 4 MiB staging buffers, pinned 4 at a time, at most 32 (128 MiB) per device. */
        public static Options defaults() {
            return new Options(false, 0, 4L << 20, 4, 32, true);
        }

        public Options withExpandableSegments(boolean enabled) {
            return new Options(enabled, expandableReserveBytes, stagingSlotBytes, stagingSlotsPerChunk, stagingMaxSlots,
                    ffmLaunches);
        }

        public Options withStaging(long slotBytes, int slotsPerChunk, int maxSlots) {
            return new Options(expandableSegments, expandableReserveBytes, slotBytes, slotsPerChunk, maxSlots,
                    ffmLaunches);
        }

        public Options withFfmLaunches(boolean enabled) {
            return new Options(expandableSegments, expandableReserveBytes, stagingSlotBytes, stagingSlotsPerChunk,
                    stagingMaxSlots, enabled);
        }
    }

    private final List<ComputeDevice> devices;
    private boolean closed;

    private CudaBackend(List<ComputeDevice> devices) {
        this.devices = List.copyOf(devices);
    }

    /** The CUDA backend with default options, or empty (logged) when no driver or device is present. */
    public static Optional<CudaBackend> tryCreate() {
        return tryCreate(Options.defaults());
    }

    /** The CUDA backend with {@code options}, or empty (logged) when no driver or device is present. */
    public static Optional<CudaBackend> tryCreate(Options options) {
        int count;
        try {
            JCudaDriver.setExceptionsEnabled(false);
            int result = cuInit(0);
            if (result != 0) {
                LOG.log(System.Logger.Level.INFO, "No CUDA backend: cuInit failed with {0}",
                        CudaDriverException.resultName(result));
                return Optional.empty();
            }
            int[] countOut = new int[1];
            result = cuDeviceGetCount(countOut);
            if (result != 0 || countOut[0] == 0) {
                LOG.log(System.Logger.Level.INFO, "No CUDA backend: {0}", result != 0
                        ? "cuDeviceGetCount failed with " + CudaDriverException.resultName(result)
                        : "the driver reports no device");
                return Optional.empty();
            }
            count = countOut[0];
        } catch (LinkageError | RuntimeException e) {
            LOG.log(System.Logger.Level.INFO, "No CUDA backend: the CUDA driver library could not be loaded ({0})",
                    String.valueOf(e.getMessage()).lines().findFirst().orElse(e.getClass().getName()));
            return Optional.empty();
        }
        List<ComputeDevice> devices = new ArrayList<>(count);
        for (int i = 0; i < count; i++) {
            CUdevice device = new CUdevice();
            Cu.check("cuDeviceGet", cuDeviceGet(device, i), "device " + i);
            devices.add(new CudaDevice(i, device, options));
        }
        LOG.log(System.Logger.Level.INFO, "CUDA backend: {0}", devices);
        return Optional.of(new CudaBackend(devices));
    }

    @Override
    public String name() {
        return "cuda";
    }

    @Override
    public List<ComputeDevice> devices() {
        return devices;
    }

    /** Frees staging memory and virtual ranges and releases the primary contexts. Streams must be closed first. */
    @Override
    public synchronized void close() {
        if (closed) {
            return;
        }
        closed = true;
        for (ComputeDevice device : devices) {
            ((CudaDevice) device).close();
        }
    }
}
