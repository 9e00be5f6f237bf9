package io.gpupool.model.graph;

import io.gpupool.backend.ComputeDevice;
import io.gpupool.backend.DeviceGraph;
import io.gpupool.backend.DeviceStream;
import io.gpupool.backend.KernelFunction;
import io.gpupool.memory.StreamFence;

import java.lang.foreign.MemorySegment;

/**
 * The stream a replayed forward runs its host code on: uploads go to the serving stream (into the
 * graph's input buffers, checked against the captured ones), the device work in between is already
 * in the graph and is dropped, and the graph is launched once, just before the first download (or
 * the final synchronize). Downloads then read the graph's outputs on the serving stream.
 * <pre>
 *   forward's calls:   upload upload | kernel kernel ... kernel | download download | synchronize
 *   serving stream:    H2D    H2D    | ──── graph launch ───── | D2H      D2H      | wait
 * </pre>
 * A call that does not fit (an upload the capture did not make, an upload or device work after a
 * download) throws {@link GraphMismatchException} before anything of the graph is launched wrongly.
 */
final class ReplayStream implements DeviceStream {

    private final DeviceStream serving;
    private final DeviceGraph graph;
    private final long[] uploadAddresses;
    private final long[] uploadBytes;
    private final long blockBase;
    private final long blockEnd;
    private int uploads;
    private boolean launched;
    private boolean failed;

    ReplayStream(DeviceStream serving, CapturedForward forward) {
        this.serving = serving;
        this.graph = forward.graph();
        this.uploadAddresses = forward.uploadAddresses();
        this.uploadBytes = forward.uploadBytes();
        this.blockBase = forward.blockAddress();
        this.blockEnd = forward.blockAddress() + forward.blockBytes();
    }

    /** Whether the graph was launched (the replay reached its downloads). */
    boolean launched() {
        return launched;
    }

    @Override
    public int ordinal() {
        return serving.ordinal();
    }

    @Override
    public StreamFence recordFence() {
        return serving.recordFence();
    }

    /** The serving stream's: memory freed through this stream is freed in its queue. */
    @Override
    public long syncMark() {
        return serving.syncMark();
    }

    @Override
    public boolean synchronizedSince(long mark) {
        return serving.synchronizedSince(mark);
    }

    @Override
    public ComputeDevice device() {
        return serving.device();
    }

    @Override
    public void copyHostToDevice(MemorySegment source, long deviceAddress, long bytes) {
        int k = uploads;
        if (launched || k >= uploadAddresses.length || uploadAddresses[k] != deviceAddress || uploadBytes[k] != bytes) {
            throw mismatch("upload " + k + " of " + bytes + " bytes to 0x" + Long.toHexString(deviceAddress)
                    + " is not one the capture made");
        }
        uploads = k + 1;
        serving.copyHostToDevice(source, deviceAddress, bytes);
    }

    @Override
    public void copyDeviceToHost(long deviceAddress, MemorySegment destination, long bytes) {
        if (deviceAddress < blockBase || deviceAddress + bytes > blockEnd) {
            throw mismatch("download of " + bytes + " bytes from 0x" + Long.toHexString(deviceAddress)
                    + " lies outside the graph's memory");
        }
        launchOnce();
        serving.copyDeviceToHost(deviceAddress, destination, bytes);
    }

    @Override
    public void copyDeviceToDevice(long sourceAddress, long destinationAddress, long bytes) {
        deviceWork("a device-to-device copy");
    }

    @Override
    public void fill(long deviceAddress, byte value, long bytes) {
        deviceWork("a fill");
    }

    @Override
    public void launch(KernelFunction function, int gridX, int gridY, int gridZ, int blockX, int blockY, int blockZ,
                       int sharedMemoryBytes, Object... arguments) {
        deviceWork("a kernel launch");
    }

    @Override
    public void enqueueHostTask(Runnable task) {
        deviceWork("a host task");
    }

    /** Device work is in the graph: nothing to enqueue, unless it comes after the outputs were read. */
    private void deviceWork(String what) {
        if (launched) {
            throw mismatch(what + " after the first download: the graph has no such work");
        }
    }

    @Override
    public void synchronize() {
        if (!failed) {
            launchOnce();
        }
        serving.synchronize();
    }

    @Override
    public void close() {
        throw new UnsupportedOperationException("a replay stream belongs to the serving stream it wraps");
    }

    private void launchOnce() {
        if (launched) {
            return;
        }
        if (uploads != uploadAddresses.length) {
            throw mismatch("the forward made " + uploads + " uploads, the capture " + uploadAddresses.length);
        }
        launched = true;
        graph.launch(serving);
    }

    private GraphMismatchException mismatch(String message) {
        failed = true;
        return new GraphMismatchException(message);
    }

    @Override
    public String toString() {
        return "graph replay on " + serving;
    }
}
