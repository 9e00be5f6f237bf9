package io.gpupool.backend.cuda;

import io.gpupool.backend.DeviceGraph;
import io.gpupool.backend.DeviceStream;
import io.gpupool.backend.GraphCapture;
import io.gpupool.backend.GraphCaptureException;
import jcuda.driver.CUgraph;
import jcuda.driver.CUgraphExec;
import jcuda.driver.CUstreamCaptureMode;

import static jcuda.driver.JCudaDriver.cuGraphDestroy;
import static jcuda.driver.JCudaDriver.cuGraphExecDestroy;
import static jcuda.driver.JCudaDriver.cuGraphInstantiate;
import static jcuda.driver.JCudaDriver.cuGraphLaunch;
import static jcuda.driver.JCudaDriver.cuStreamBeginCapture;
import static jcuda.driver.JCudaDriver.cuStreamEndCapture;

/**
 * CUDA stream capture on a stream of its own (see {@link GraphCapture} for the rules):
 * <ol>
 *   <li>begin: the stream redirects its copies to the listener, then
 *       {@code cuStreamBeginCapture(stream, THREAD_LOCAL)}: only this thread's unsafe calls (an
 *       allocation, a synchronize) invalidate the capture, so serving threads carry on meanwhile;</li>
 *   <li>the forward enqueues its kernels on the stream: the driver records them;</li>
 *   <li>end: {@code cuStreamEndCapture} yields the graph, {@code cuGraphInstantiate} the executable
 *       one; the graph itself is destroyed at once (the executable graph does not need it);</li>
 *   <li>launch: {@code cuGraphLaunch} on the serving stream; close: {@code cuGraphExecDestroy}.</li>
 * </ol>
 * An invalidated capture is reported by {@code cuStreamEndCapture}; the stream is back to normal
 * after it, whatever it returned.
 */
final class CudaGraphCapture implements GraphCapture {

    private final CudaDevice device;
    private final CudaStream stream;
    /** Guarded by {@code this}. */
    private boolean capturing;

    CudaGraphCapture(CudaDevice device, int ordinal) {
        this.device = device;
        this.stream = new CudaStream(device, ordinal);
    }

    @Override
    public synchronized DeviceStream begin(CopyListener copies) {
        if (capturing) {
            throw new IllegalStateException(stream + " is already capturing a graph");
        }
        stream.synchronize();
        stream.redirectForCapture(new Redirect(copies));
        device.makeCurrent();
        int result = cuStreamBeginCapture(stream.handle(), CUstreamCaptureMode.CU_STREAM_CAPTURE_MODE_THREAD_LOCAL);
        if (result != 0) {
            stream.redirectForCapture(null);
            throw new GraphCaptureException(new CudaDriverException("cuStreamBeginCapture", result, stream.toString())
                    .getMessage());
        }
        capturing = true;
        return stream;
    }

    @Override
    public synchronized DeviceGraph end() {
        if (!capturing) {
            throw new IllegalStateException(stream + " is not capturing");
        }
        device.makeCurrent();
        CUgraph graph = new CUgraph();
        int result = cuStreamEndCapture(stream.handle(), graph);
        capturing = false;
        stream.redirectForCapture(null);
        if (result != 0) {
            throw new GraphCaptureException(new CudaDriverException("cuStreamEndCapture", result, stream.toString())
                    .getMessage());
        }
        CUgraphExec exec = new CUgraphExec();
        int instantiated = cuGraphInstantiate(exec, graph, 0);
        int destroyed = cuGraphDestroy(graph);
        if (instantiated != 0) {
            throw new GraphCaptureException(new CudaDriverException("cuGraphInstantiate", instantiated,
                    stream.toString()).getMessage());
        }
        if (destroyed != 0) {
            cuGraphExecDestroy(exec);
            throw new GraphCaptureException(new CudaDriverException("cuGraphDestroy", destroyed, null).getMessage());
        }
        return new CudaGraph(device, exec);
    }

    @Override
    public synchronized void abort() {
        if (!capturing) {
            return;
        }
        device.makeCurrent();
        CUgraph graph = new CUgraph();
        int result = cuStreamEndCapture(stream.handle(), graph);
        capturing = false;
        stream.redirectForCapture(null);
        if (result == 0) {
            cuGraphDestroy(graph);
        }
    }

    @Override
    public synchronized void close() {
        abort();
        stream.close();
    }

    /** Reports copies and enforces their order around the recorded device work. */
    private static final class Redirect implements CudaStream.CaptureRedirect {
        private final CopyListener copies;
        private boolean deviceWork;
        private boolean downloaded;

        Redirect(CopyListener copies) {
            this.copies = copies;
        }

        @Override
        public void hostToDevice(long deviceAddress, long bytes) {
            if (deviceWork || downloaded) {
                throw new GraphCaptureException("an upload after device work cannot be captured: a replay "
                        + "copies the inputs before launching the graph");
            }
            copies.hostToDevice(deviceAddress, bytes);
        }

        @Override
        public void deviceToHost(long deviceAddress, long bytes) {
            downloaded = true;
            copies.deviceToHost(deviceAddress, bytes);
        }

        @Override
        public void deviceWork(String what) {
            if (downloaded) {
                throw new GraphCaptureException(what + " after a download cannot be captured: a replay "
                        + "copies the outputs after the whole graph");
            }
            deviceWork = true;
        }
    }

    /** An instantiated graph of this device. */
    private static final class CudaGraph implements DeviceGraph {
        private final CudaDevice device;
        private final CUgraphExec exec;
        private boolean closed;

        CudaGraph(CudaDevice device, CUgraphExec exec) {
            this.device = device;
            this.exec = exec;
        }

        @Override
        public void launch(DeviceStream stream) {
            if (!(stream instanceof CudaStream cuda) || cuda.device() != device) {
                throw new IllegalArgumentException("a graph of " + device.label() + " cannot be launched on " + stream);
            }
            device.makeCurrent();
            Cu.check("cuGraphLaunch", cuGraphLaunch(exec, cuda.handle()), cuda.toString());
        }

        @Override
        public synchronized void close() {
            if (closed) {
                return;
            }
            closed = true;
            device.makeCurrent();
            Cu.check("cuGraphExecDestroy", cuGraphExecDestroy(exec));
        }
    }
}
