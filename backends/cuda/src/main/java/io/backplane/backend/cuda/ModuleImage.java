package io.backplane.backend.cuda;

import io.backplane.spi.BackplaneException;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.jspecify.annotations.Nullable;

/**
 * A module file as loaded from a version folder: PTX text, a cubin (ELF) or a fatbinary. For PTX,
 * what can be checked without a GPU is read from the text: the ISA version (which fixes the
 * oldest driver able to JIT it) and every {@code .entry} with its parameter sizes.
 *
 * @param fileName the file, for messages
 * @param bytes the image as {@code cuModuleLoadData} takes it (without the trailing NUL)
 * @param kind what the bytes are
 * @param ptxVersion the PTX ISA version times 10 (e.g. 80 for 8.0), 0 when not PTX
 * @param entries PTX entry names with their parameter sizes in bytes; empty when not PTX
 */
record ModuleImage(String fileName, byte[] bytes, Kind kind, int ptxVersion, Map<String, List<Integer>> entries) {
    enum Kind { PTX, CUBIN, FATBIN }

    private static final Pattern VERSION = Pattern.compile("(?m)^\\s*\\.version\\s+(\\d+)\\.(\\d+)");
    private static final Pattern ENTRY = Pattern.compile("\\.entry\\s+([A-Za-z_$][\\w$]*)\\s*\\(([^)]*)\\)");
    private static final Pattern PARAM = Pattern.compile("\\.param\\s+(?:\\.align\\s+\\d+\\s+)?\\.([a-z]+)(\\d+)(?:\\s+\\.ptr)?"
            + "(?:\\s+\\.(?:global|const|shared|local))?(?:\\s+\\.align\\s+\\d+)?\\s+[\\w$]+(?:\\[(\\d+)])?");

    /** PTX ISA version (×10) → the CUDA version (×1000 + ×10) that introduced it. */
    private static final Map<Integer, Integer> PTX_TO_CUDA = Map.ofEntries(
            Map.entry(70, 11000), Map.entry(71, 11010), Map.entry(72, 11020), Map.entry(73, 11030), Map.entry(74, 11040),
            Map.entry(75, 11050), Map.entry(76, 11060), Map.entry(77, 11070), Map.entry(78, 11080), Map.entry(80, 12000),
            Map.entry(81, 12010), Map.entry(82, 12020), Map.entry(83, 12030), Map.entry(84, 12040), Map.entry(85, 12050),
            Map.entry(86, 12070), Map.entry(87, 12080), Map.entry(88, 12090), Map.entry(90, 13000));

    /**
     * Reads an image and, for PTX, its version and entries.
     *
     * @throws BackplaneException INVALID_ARGUMENT for an empty file or PTX without a version line
     */
    static ModuleImage parse(String fileName, byte[] bytes) {
        if (bytes.length == 0) {
            throw BackplaneException.invalid("CUDA module " + fileName + " is empty");
        }
        if (bytes.length >= 4 && bytes[0] == 0x7f && bytes[1] == 'E' && bytes[2] == 'L' && bytes[3] == 'F') {
            return new ModuleImage(fileName, bytes, Kind.CUBIN, 0, Map.of());
        }
        if (bytes.length >= 4 && (bytes[0] & 0xff) == 0x50 && (bytes[1] & 0xff) == 0xed && (bytes[2] & 0xff) == 0x55 && (bytes[3] & 0xff) == 0xba) {
            return new ModuleImage(fileName, bytes, Kind.FATBIN, 0, Map.of());
        }
        String text = new String(bytes, StandardCharsets.UTF_8);
        Matcher v = VERSION.matcher(text);
        if (!v.find()) {
            throw BackplaneException.invalid("CUDA module " + fileName + " is neither a cubin (ELF), a fatbinary nor PTX"
                    + " (no '.version' line); generate it with nvcc -ptx or -cubin");
        }
        int version = Integer.parseInt(v.group(1)) * 10 + Integer.parseInt(v.group(2));
        Map<String, List<Integer>> entries = new LinkedHashMap<>();
        Matcher e = ENTRY.matcher(text);
        while (e.find()) {
            List<Integer> sizes = new ArrayList<>();
            Matcher p = PARAM.matcher(e.group(2));
            while (p.find()) {
                int bits = Integer.parseInt(p.group(2));
                int count = p.group(3) == null ? 1 : Integer.parseInt(p.group(3));
                sizes.add(bits / 8 * count);
            }
            entries.put(e.group(1), List.copyOf(sizes));
        }
        return new ModuleImage(fileName, bytes, Kind.PTX, version, Map.copyOf(entries));
    }

    /** The oldest driver version ({@code cuDriverGetVersion} form) able to JIT this PTX; 0 when not PTX or unknown. */
    int requiredDriverVersion() {
        if (kind != Kind.PTX) {
            return 0;
        }
        Integer known = PTX_TO_CUDA.get(ptxVersion);
        if (known != null) {
            return known;
        }
        return ptxVersion > 90 ? 13000 + (ptxVersion - 90) * 10 : 0;
    }

    /** The parameter sizes of PTX entry {@code name}, or null when the module is not PTX or has no such entry. */
    @Nullable List<Integer> entryParameters(String name) {
        return entries.get(name);
    }

    String ptxVersionString() {
        return ptxVersion / 10 + "." + ptxVersion % 10;
    }
}
