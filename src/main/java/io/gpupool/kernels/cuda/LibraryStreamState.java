package io.gpupool.kernels.cuda;

import io.gpupool.backend.DeviceStream;
import io.gpupool.backend.MatmulLibrary;
import io.gpupool.backend.MatmulLibrary.Matmul;
import io.gpupool.kernels.StreamWorkspaces;

/**
 * One stream's cuBLASLt plans and where its workspace comes from, for {@link LibraryGemm}; touched only by the
 * request that holds the stream (a stream runs one request at a time), so it needs no lock.
 * <pre>
 *   own workspace   the stream's block of {@link StreamWorkspaces}: allocated on its first product, kept while it
 *                   is busy, given back when its owner releases the idle stream
 *   pinned          {@link CudaTensorOps#useWorkspace} gave memory of the caller's (a graph capture): no block of
 *                   its own; the most any product needed since is noted, so the capture knows what to carry
 * </pre>
 * A stream first seen pinned (the capture stream) never takes a workspace from the pool: a pool call while a stream
 * captures would query fences and is illegal under capture.
 */
final class LibraryStreamState {

    /** False for a stream first seen pinned (a capture stream): it never takes a workspace from the pool. */
    final boolean ownWorkspace;
    /** The stream's plans by product key ({@link LibraryGemm} builds the keys). */
    final PlanCache plans = new PlanCache();
    boolean pinned;
    long pinnedAddress;
    long pinnedBytes;
    /** Most workspace a product run on the stream needed since the last {@link CudaTensorOps#useWorkspace}. */
    long neededSincePinned;

    LibraryStreamState(boolean ownWorkspace) {
        this.ownWorkspace = ownWorkspace;
    }

    /** Pins the caller's workspace ({@code address} 0: withdraws it) and starts noting what products need anew. */
    void pin(long address, long bytes) {
        pinned = address != 0;
        pinnedAddress = address;
        pinnedBytes = bytes;
        neededSincePinned = 0;
    }

    /**
     * The workspace candidates may use while a shape is measured, without noting any need (only the winner's
     * runs count towards a capture's workspace): the stream's own, the pinned one, or 0 for none.
     */
    long tuningWorkspace(DeviceStream stream, StreamWorkspaces workspaces) {
        if (!pinned && ownWorkspace) {
            return workspaces.address(stream);
        }
        return pinned ? pinnedAddress : 0;
    }

    /**
     * The workspace address for a run of {@code plan}, noting what it needs while pinned; fails where a pinned
     * workspace is too small or was withdrawn and the plan needs one.
     */
    long workspaceFor(Matmul plan, MatmulLibrary library, DeviceStream stream, StreamWorkspaces workspaces) {
        if (!pinned && ownWorkspace) {
            return workspaces.address(stream);
        }
        long need = library.workspaceBytes(plan);
        neededSincePinned = Math.max(neededSincePinned, need);
        if (pinned && need <= pinnedBytes) {
            return pinnedAddress;
        }
        if (need == 0) {
            return 0; // an algorithm without scratch runs without a workspace
        }
        throw new IllegalStateException(stream + " has " + (pinned ? "a pinned workspace of " + pinnedBytes
                + " bytes; this product needs " + need : "no workspace (its pinned one was withdrawn)"));
    }
}
