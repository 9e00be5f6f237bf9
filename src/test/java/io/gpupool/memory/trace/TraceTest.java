package io.gpupool.memory.trace;

import org.junit.jupiter.api.Test;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.StringReader;
import java.io.StringWriter;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

class TraceTest {

    @Test
    void writesRmmFormatAndReadsItBack() throws IOException {
        Trace trace = new Trace(2);
        long time = ((16 * 60 + 2) * 60 + 11) * 1_000_000_000L + 48_213_000L; // 16:02:11.048213
        trace.add(140, time, Trace.ALLOCATE, 0x7f00_0000_0000L, 3_145_728, 0);
        trace.add(140, time + 17_000, Trace.FREE, 0x7f00_0000_0000L, 3_145_728, 0);
        trace.add(141, time + 99_000, Trace.ALLOCATE_FAILURE, 0, 1L << 30, Trace.NO_STREAM);
        StringWriter out = new StringWriter();
        trace.write(out);
        assertThat(out.toString()).isEqualTo("""
                Thread,Time,Action,Pointer,Size,Stream
                140,16:02:11.048213,allocate,0x7f0000000000,3145728,0
                140,16:02:11.048230,free,0x7f0000000000,3145728,0
                141,16:02:11.048312,allocate failure,0x0,1073741824,none
                """);
        Trace back = Trace.read(new BufferedReader(new StringReader(out.toString())), "mem");
        assertThat(back.size()).isEqualTo(3);
        assertThat(back.pointer(0)).isEqualTo(0x7f00_0000_0000L);
        assertThat(back.bytes(2)).isEqualTo(1L << 30);
        assertThat(back.action(2)).isEqualTo(Trace.ALLOCATE_FAILURE);
        assertThat(back.stream(2)).isEqualTo(Trace.NO_STREAM);
        assertThat(back.timeNanos(1)).isEqualTo(time + 17_000);
    }

    @Test
    void acceptsHexStreamsAndNumericTimesAsOtherWritersProduce() throws IOException {
        Trace trace = Trace.read(new BufferedReader(new StringReader("""
                Thread,Time,Action,Pointer,Size,Stream
                7,123456,allocate,4096,256,0x1f
                """)), "rmm.csv");
        assertThat(trace.stream(0)).isEqualTo(31);
        assertThat(trace.pointer(0)).isEqualTo(4096);
        assertThat(trace.timeNanos(0)).isEqualTo(123456);
    }

    @Test
    void errorsNameTheSourceTheLineAndTheField() {
        assertThatThrownBy(() -> read("Thread,Time,Action,Pointer,Size\n"))
                .hasMessageContaining("rmm.csv").hasMessageContaining("header");
        assertThatThrownBy(() -> read(Trace.HEADER + "\n1,00:00:00.000001,allocate,0x10,abc,0\n"))
                .hasMessageContaining("rmm.csv:2").hasMessageContaining("Size").hasMessageContaining("abc");
        assertThatThrownBy(() -> read(Trace.HEADER + "\n\n1,00:00:00.000001,alloc,0x10,1,0\n"))
                .hasMessageContaining("rmm.csv:3").hasMessageContaining("Action");
        assertThatThrownBy(() -> read(Trace.HEADER + "\n1,00:00:00.000001,free,0x10\n"))
                .hasMessageContaining("expected 6 fields");
    }

    private static Trace read(String text) throws IOException {
        return Trace.read(new BufferedReader(new StringReader(text)), "rmm.csv");
    }
}
