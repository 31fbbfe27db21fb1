package io.backplane.backend.torch;

import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Enumeration;
import java.util.List;
import java.util.Optional;
import java.util.zip.ZipEntry;
import java.util.zip.ZipFile;
import org.jspecify.annotations.Nullable;

/**
 * The argument names of a TorchScript file's {@code forward} method, read from the archive itself:
 * DJL's engine does not expose a method's schema, and Triton's PyTorch backend maps inputs by these
 * names. A TorchScript archive holds the root module's class name as the first global of
 * {@code data.pkl} ({@code __torch__.a.b.Net}) and that class's code in {@code code/__torch__/a/b.py}
 * (or {@code code/__torch__.py} at top level), where {@code def forward(self: ..., x: Tensor, ...)}
 * names the arguments. Anything unexpected yields empty: the caller then maps by {@code __<index>}
 * or by order, as Triton does when names do not match.
 */
final class ForwardSignature {
    private ForwardSignature() {
    }

    /** The forward arguments after {@code self}, in order; empty when the archive cannot tell. */
    static Optional<List<String>> read(Path modelFile) {
        try (ZipFile zip = new ZipFile(modelFile.toFile())) {
            String prefix = "";
            ZipEntry dataPkl = null;
            for (Enumeration<? extends ZipEntry> e = zip.entries(); e.hasMoreElements();) {
                ZipEntry z = e.nextElement();
                if (z.getName().endsWith("/data.pkl") && z.getName().indexOf('/') == z.getName().length() - "/data.pkl".length()) {
                    dataPkl = z;
                    prefix = z.getName().substring(0, z.getName().length() - "data.pkl".length());
                    break;
                }
            }
            if (dataPkl == null) {
                return Optional.empty();
            }
            String root = rootClass(read(zip, dataPkl));
            if (root == null || !root.startsWith("__torch__.")) {
                return Optional.empty();
            }
            int dot = root.lastIndexOf('.');
            String module = root.substring(0, dot);
            String cls = root.substring(dot + 1);
            ZipEntry code = zip.getEntry(prefix + "code/" + module.replace('.', '/') + ".py");
            if (code == null) {
                return Optional.empty();
            }
            return forwardArguments(new String(read(zip, code), StandardCharsets.UTF_8), cls);
        } catch (IOException | RuntimeException e) {
            return Optional.empty();
        }
    }

    private static byte[] read(ZipFile zip, ZipEntry e) throws IOException {
        try (InputStream in = zip.getInputStream(e)) {
            return in.readNBytes(1 << 24);
        }
    }

    /** The first GLOBAL opcode ({@code c<module>\n<name>\n}) of a pickle: the root object's class. */
    static @Nullable String rootClass(byte[] pkl) {
        int start = pkl.length > 2 && (pkl[0] & 0xff) == 0x80 ? 2 : 0; // PROTO n
        if (start >= pkl.length || pkl[start] != 'c') {
            return null;
        }
        int a = indexOf(pkl, start + 1);
        int b = a < 0 ? -1 : indexOf(pkl, a + 1);
        if (b < 0) {
            return null;
        }
        return new String(pkl, start + 1, a - start - 1, StandardCharsets.UTF_8) + "." + new String(pkl, a + 1, b - a - 1, StandardCharsets.UTF_8);
    }

    private static int indexOf(byte[] b, int from) {
        for (int i = from; i < b.length; i++) {
            if (b[i] == '\n') {
                return i;
            }
        }
        return -1;
    }

    /** The arguments of {@code def forward(self...)} inside {@code class <cls>(...)} of TorchScript's printed code. */
    static Optional<List<String>> forwardArguments(String code, String cls) {
        int c = code.indexOf("class " + cls + "(");
        if (c < 0) {
            return Optional.empty();
        }
        int next = code.indexOf("\nclass ", c + 1);
        String body = code.substring(c, next < 0 ? code.length() : next);
        int f = body.indexOf("def forward(");
        if (f < 0) {
            return Optional.empty();
        }
        int i = f + "def forward(".length();
        int depth = 0;
        StringBuilder cur = new StringBuilder();
        List<String> parts = new ArrayList<>();
        for (; i < body.length(); i++) {
            char ch = body.charAt(i);
            if (ch == '(' || ch == '[') {
                depth++;
            } else if ((ch == ')' || ch == ']') && depth > 0) {
                depth--;
            } else if (ch == ')') {
                parts.add(cur.toString());
                break;
            } else if (ch == ',' && depth == 0) {
                parts.add(cur.toString());
                cur.setLength(0);
                continue;
            }
            cur.append(ch);
        }
        List<String> names = new ArrayList<>();
        for (String p : parts) {
            String s = p.strip();
            if (s.isEmpty()) {
                continue;
            }
            int colon = s.indexOf(':');
            int eq = s.indexOf('=');
            int end = colon >= 0 ? colon : eq >= 0 ? eq : s.length();
            names.add(s.substring(0, end).strip());
        }
        if (names.isEmpty() || !names.getFirst().equals("self")) {
            return Optional.empty();
        }
        return Optional.of(List.copyOf(names.subList(1, names.size())));
    }
}
