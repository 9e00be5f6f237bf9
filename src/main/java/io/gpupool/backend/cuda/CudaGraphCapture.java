package io.gpupool.backend.cuda;

import io.gpupool.backend.DeviceGraph;
import io.gpupool.backend.DeviceStream;
import io.gpupool.backend.GraphCapture;
import io.gpupool.backend.GraphCaptureException;
import jcuda.driver.CUgraph;
import jcuda.driver.CUgraphExec;
import jcuda.driver.CUresult;
import jcuda.driver.CUstreamCaptureMode;
import jcuda.driver.CUstreamCaptureStatus;

import static jcuda.driver.JCudaDriver.cuGraphDestroy;
import static jcuda.driver.JCudaDriver.cuGraphExecDestroy;
import static jcuda.driver.JCudaDriver.cuGraphInstantiate;
import static jcuda.driver.JCudaDriver.cuGraphLaunch;
import static jcuda.driver.JCudaDriver.cuStreamBeginCapture;
import static jcuda.driver.JCudaDriver.cuStreamEndCapture;
import static jcuda.driver.JCudaDriver.cuStreamIsCapturing;
import static jcuda.driver.JCudaDriver.cuStreamQuery;

/**
 * CUDA stream capture on a stream of its own (see {@link GraphCapture} for the contract):
 * <ol>
 *   <li>begin: the stream is synchronised (its worker drained: no copy's event is waited on while it
 *       captures), redirects its copies to the listener, then
 *       {@code cuStreamBeginCapture(stream, THREAD_LOCAL)};</li>
 *   <li>the forward enqueues its kernels and library calls on the stream: the driver records them;</li>
 *   <li>end: {@code cuStreamEndCapture} yields the graph, {@code cuGraphInstantiate} the executable
 *       one; the graph itself is destroyed at once (the executable graph does not need it);</li>
 *   <li>launch: {@code cuGraphLaunch} on the serving stream; close: {@code cuGraphExecDestroy}.</li>
 * </ol>
 *
 * <h2>Why thread-local mode</h2>
 * Under {@code GLOBAL} mode an unsafe call (an allocation, an event query, a synchronize) from
 * <em>any</em> thread would invalidate the capture, and serving threads make such calls all the time
 * (the pool queries fences, streams synchronise). Under {@code THREAD_LOCAL} only the capturing
 * thread's own unsafe calls do; the serving threads run on, and their calls on their own streams are
 * legal. {@code RELAXED} is not needed: nothing our capturing thread does is unsafe (rules below), and
 * thread-local mode turns a slip into a clean capture failure instead of a graph that silently depends
 * on an allocation made while capturing.
 *
 * <h2>Rules while the stream captures (what the code path guarantees)</h2>
 * <ol>
 *   <li><b>No allocation or free from the driver or the pool</b> on the capturing thread: the
 *       forward's activations come from the graph's block ({@code model/graph/GraphArena}), allocated
 *       on the graph stream before {@link #begin}; the cuBLASLt workspace is pinned inside that block
 *       ({@code TensorOps.useWorkspace}), so {@code CudaTensorOps} never asks the pool for one.</li>
 *   <li><b>The capture stream is never a pool stream</b>: no block is ever allocated on it, so the
 *       pool never records a fence on it, never queries one of its events, and never makes it wait
 *       ({@code memory/pool/FenceSet} only holds fences of streams that freed memory). A fence asked
 *       of it while it captures fails loudly ({@link CudaStream#recordFence}).</li>
 *   <li><b>No event query or synchronize on the capturing stream</b>: {@link CudaStream#synchronize}
 *       returns at once while redirected; host tasks fail; host↔device copies are redirected (no
 *       staging slot, no event, no host-synchronous copy).</li>
 *   <li><b>No heuristic query and no lazy kernel load</b> inside the capture: a warm-up run of the same
 *       forward on this stream, out of capture, planned every product of that shape on this stream's
 *       plans and made every kernel resident first ({@code model/graph/ForwardCapture}).</li>
 *   <li>Other threads only touch this stream to ask {@link #capturing()} ({@code cuStreamIsCapturing},
 *       legal during a capture).</li>
 * </ol>
 *
 * <h2>Failure</h2>
 * Whatever fails (begin, the body, end, instantiate), {@link #end} and {@link #abort} leave the stream
 * out of capture mode: they end the capture, destroy any partial graph, then check with
 * {@code cuStreamIsCapturing} and {@code cuStreamQuery} that the stream is idle and usable; a stream
 * that is not is destroyed and replaced by a fresh one with the same ordinal, so the next capture
 * starts clean. None of these calls waits for device work except the synchronize before begin and
 * the close of a replaced stream (one in an error state, whose synchronize returns at once).
 */
final class CudaGraphCapture implements GraphCapture {

    private static final System.Logger LOG = System.getLogger(CudaGraphCapture.class.getName());

    private final CudaDevice device;
    private final int ordinal;
    /** Replaced when a failed capture leaves it unusable. Guarded by {@code this}. */
    private CudaStream stream;
    /** Guarded by {@code this}. */
    private boolean capturing;
    /** Streams replaced after a failure (package use: tests read it). */
    private int replacedStreams;

    CudaGraphCapture(CudaDevice device, int ordinal) {
        this.device = device;
        this.ordinal = ordinal;
        this.stream = new CudaStream(device, ordinal);
    }

    @Override
    public synchronized DeviceStream stream() {
        return stream;
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
            recover("cuStreamBeginCapture", result);
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
        if (result != 0) {
            recover("cuStreamEndCapture", result);
            throw new GraphCaptureException(new CudaDriverException("cuStreamEndCapture", result, stream.toString())
                    .getMessage());
        }
        stream.redirectForCapture(null);
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
        destroyEnded(graph, result);
        recover(result == 0 ? null : "cuStreamEndCapture", result);
    }

    /** The driver's view: true while the stream is in a capture sequence (active or invalidated). */
    @Override
    public synchronized boolean capturing() {
        return captureStatus(stream) != CUstreamCaptureStatus.CU_STREAM_CAPTURE_STATUS_NONE;
    }

    synchronized int replacedStreams() {
        return replacedStreams;
    }

    @Override
    public synchronized void close() {
        abort();
        stream.close();
    }

    /** Destroys what an ended capture returned: a graph only when it succeeded (a failed end returns none). */
    private static void destroyEnded(CUgraph graph, int endResult) {
        if (endResult == 0) {
            cuGraphDestroy(graph);
        }
    }

    /**
     * After a capture that failed or was aborted: ends any capture sequence the driver still has on the
     * stream, then keeps the stream if it is idle or running, else replaces it. Never throws for the
     * old stream's state; throws only when no replacement stream can be created.
     */
    private void recover(String failedCall, int result) {
        stream.redirectForCapture(null);
        int status = captureStatus(stream);
        if (status != CUstreamCaptureStatus.CU_STREAM_CAPTURE_STATUS_NONE) {
            CUgraph leftover = new CUgraph();
            destroyEnded(leftover, cuStreamEndCapture(stream.handle(), leftover));
            status = captureStatus(stream);
        }
        int query = cuStreamQuery(stream.handle());
        boolean usable = status == CUstreamCaptureStatus.CU_STREAM_CAPTURE_STATUS_NONE
                && (query == CUresult.CUDA_SUCCESS || query == CUresult.CUDA_ERROR_NOT_READY);
        if (usable) {
            return;
        }
        LOG.log(System.Logger.Level.WARNING, "{0} is unusable after {1} ({2}; capture status {3}, cuStreamQuery {4}): "
                + "replacing it", stream, failedCall == null ? "an aborted capture" : failedCall,
                CUresult.stringFor(result), CUstreamCaptureStatus.stringFor(status), CUresult.stringFor(query));
        CudaStream broken = stream;
        stream = new CudaStream(device, ordinal);
        replacedStreams++;
        try {
            broken.close();
        } catch (RuntimeException e) {
            LOG.log(System.Logger.Level.DEBUG, "Closing the replaced {0} failed: {1}", broken, e.toString());
        }
    }

    /** cuStreamIsCapturing's status; a failing query counts as still capturing (so the stream is replaced). */
    private int captureStatus(CudaStream of) {
        device.makeCurrent();
        int[] status = {CUstreamCaptureStatus.CU_STREAM_CAPTURE_STATUS_NONE};
        int result = cuStreamIsCapturing(of.handle(), status);
        return result == 0 ? status[0] : CUstreamCaptureStatus.CU_STREAM_CAPTURE_STATUS_INVALIDATED;
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
