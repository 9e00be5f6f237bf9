package io.gpupool.lab;

import io.gpupool.backend.DeviceStream;
import io.gpupool.kernels.StreamWorkspaces;
import io.gpupool.kernels.TensorOps;
import io.gpupool.memory.DeviceAllocator;

import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.lang.reflect.Proxy;
import java.util.Optional;

/**
 * Host kernels that hold pool memory per stream as cuBLASLt does on CUDA: every {@code linear} first takes its
 * stream's workspace from {@link StreamWorkspaces} (allocating from the pool when the stream holds none), then
 * runs the real kernels; {@code workspaces()} reports them, {@code close()} gives them back. So a host server
 * exercises the workspace release (idle period, trim) and the soak's drain check with real bytes at stake. A
 * dynamic proxy, so that operations added to {@link TensorOps} are forwarded without a change here.
 */
final class WorkspaceTakingOps {

    private WorkspaceTakingOps() {
    }

    /** {@code real} taking a workspace of {@code bytesPerStream} from {@code pool} before each product. */
    static TensorOps over(TensorOps real, DeviceAllocator pool, long bytesPerStream) {
        StreamWorkspaces workspaces = new StreamWorkspaces(pool, bytesPerStream);
        return (TensorOps) Proxy.newProxyInstance(TensorOps.class.getClassLoader(),
                new Class<?>[] {TensorOps.class, AutoCloseable.class},
                (proxy, method, arguments) -> invoke(real, workspaces, proxy, method, arguments));
    }

    private static Object invoke(TensorOps real, StreamWorkspaces workspaces, Object proxy, Method method,
                                 Object[] arguments) throws Throwable {
        switch (method.getName()) {
            case "workspaces" -> {
                return Optional.of(workspaces);
            }
            case "close" -> {
                workspaces.close();
                return null;
            }
            case "linear" -> workspaces.address((DeviceStream) arguments[0]);
            case "equals" -> {
                return proxy == arguments[0];
            }
            case "hashCode" -> {
                return System.identityHashCode(proxy);
            }
            case "toString" -> {
                return "workspace-taking " + real;
            }
            default -> {
            }
        }
        try {
            return method.invoke(real, arguments);
        } catch (InvocationTargetException e) {
            throw e.getCause();
        }
    }
}
