package io.backplane.backend.cuda;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.backplane.spi.BackplaneException;
import java.io.IOException;
import java.nio.file.Files;
import java.util.List;
import org.junit.jupiter.api.Test;

class ModuleImageTest {
    @Test
    void parse_samplePtx_readsIsaVersionAndEntryParameters() throws IOException {
        ModuleImage image = ModuleImage.parse("saxpy.ptx", Files.readAllBytes(Fixtures.SAMPLE.resolve("1/saxpy.ptx")));
        assertEquals(ModuleImage.Kind.PTX, image.kind());
        assertEquals(70, image.ptxVersion());
        assertEquals(11000, image.requiredDriverVersion());
        assertEquals(List.of(4, 4, 8, 8, 8), image.entryParameters("saxpy"));
        assertNull(image.entryParameters("nope"));
    }

    @Test
    void parse_newerPtxQualifiers_areUnderstood() {
        String ptx = ".version 9.0\n.target sm_90\n.visible .entry k(\n .param .u64 .ptr .global .align 4 k_param_0,\n"
                + " .param .align 8 .b8 k_param_1[24],\n .param .f64 k_param_2\n)\n{ ret; }\n";
        ModuleImage image = ModuleImage.parse("k.ptx", ptx.getBytes());
        assertEquals(List.of(8, 24, 8), image.entryParameters("k"));
        assertEquals(13000, image.requiredDriverVersion());
        assertEquals("9.0", image.ptxVersionString());
    }

    @Test
    void parse_cubinAndFatbin_areRecognizedByMagic() {
        assertEquals(ModuleImage.Kind.CUBIN, ModuleImage.parse("m.cubin", new byte[] {0x7f, 'E', 'L', 'F', 2, 1}).kind());
        assertEquals(ModuleImage.Kind.FATBIN, ModuleImage.parse("m.fatbin", new byte[] {0x50, (byte) 0xed, 0x55, (byte) 0xba, 1, 0}).kind());
        assertEquals(0, ModuleImage.parse("m.cubin", new byte[] {0x7f, 'E', 'L', 'F'}).requiredDriverVersion());
    }

    @Test
    void parse_neitherPtxNorBinary_isAClearError() {
        var e = assertThrows(BackplaneException.class, () -> ModuleImage.parse("model.ptx", "hello".getBytes()));
        assertTrue(e.getMessage().contains("neither a cubin (ELF), a fatbinary nor PTX"), e.getMessage());
        assertThrows(BackplaneException.class, () -> ModuleImage.parse("model.ptx", new byte[0]));
    }
}
