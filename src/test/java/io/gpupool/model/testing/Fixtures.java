package io.gpupool.model.testing;

import io.gpupool.model.DataType;
import io.gpupool.model.HostTensor;
import io.gpupool.model.safetensors.SafetensorsFile;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.net.URISyntaxException;
import java.nio.file.Path;

/** Paths of the committed fixtures and helpers to turn reference tensors into request inputs. */
public final class Fixtures {

    private Fixtures() {
    }

    public static Path fixture(String name) {
        try {
            return Path.of(Fixtures.class.getResource("/fixtures/" + name).toURI());
        } catch (URISyntaxException e) {
            throw new IllegalStateException(e);
        }
    }

    /** An INT64 reference tensor as a request input called {@code inputName}. */
    public static HostTensor int64(SafetensorsFile reference, String tensor, String inputName) {
        long[] values = reference.readLongs(tensor);
        MemorySegment data = Arena.ofAuto().allocate((long) values.length * Long.BYTES, 8);
        MemorySegment.copy(values, 0, data, ValueLayout.JAVA_LONG, 0, values.length);
        return new HostTensor(inputName, DataType.INT64, reference.info(tensor).shape(), data);
    }

    /** An FP32 reference tensor as a request input called {@code inputName}. */
    public static HostTensor fp32(SafetensorsFile reference, String tensor, String inputName) {
        float[] values = reference.readFloats(tensor);
        MemorySegment data = Arena.ofAuto().allocate((long) values.length * Float.BYTES, 8);
        MemorySegment.copy(values, 0, data, ValueLayout.JAVA_FLOAT, 0, values.length);
        return new HostTensor(inputName, DataType.FP32, reference.info(tensor).shape(), data);
    }

    public static float[] floats(HostTensor tensor) {
        return tensor.data().toArray(ValueLayout.JAVA_FLOAT);
    }

    public static double maxAbsDiff(float[] expected, float[] actual) {
        if (expected.length != actual.length) {
            throw new AssertionError("length " + actual.length + ", expected " + expected.length);
        }
        double max = 0;
        for (int i = 0; i < expected.length; i++) {
            max = Math.max(max, Math.abs((double) expected[i] - actual[i]));
            if (Float.isNaN(actual[i])) {
                return Double.NaN;
            }
        }
        return max;
    }
}
