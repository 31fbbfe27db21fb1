package io.backplane.backend.python;

import io.backplane.spi.BackplaneException;
import io.backplane.spi.ErrorCode;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.channels.FileChannel;
import java.nio.file.DirectoryStream;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.nio.file.attribute.PosixFilePermissions;
import java.security.SecureRandom;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The shared memory of one stub generation: host chunks ({@code <prefix>-h<k>}, written by the
 * host: control block, execution messages, inputs) and stub chunks ({@code <prefix>-s<k>},
 * written by the stub: results and outputs). Files are 0600 with an unguessable name
 * {@code backplane-<hostpid>-<random>-g<generation>}, unlinked on {@link #close()}.
 *
 * <p>Host chunks are carved by a first-fit allocator; a request that does not fit grows the
 * region by a new chunk, up to {@code maxBytes}. Every offset the stub sends is checked against
 * the chunk it names before the host touches it.
 */
final class SharedRegion implements AutoCloseable {
    private static final Logger log = LoggerFactory.getLogger(SharedRegion.class);
    static final Path SHM_DIR = Path.of("/dev/shm");
    static final String FILE_PREFIX = "backplane-";
    private static final long ALIGN = 64;
    private static final int MAX_CHUNKS = 4096;
    private static final SecureRandom RANDOM = new SecureRandom();
    private static final MemorySegment EMPTY = MemorySegment.ofArray(new byte[0]);
    private static final java.util.regex.Pattern OWN_FILE = java.util.regex.Pattern.compile("backplane-\\d+-[0-9a-f]{24}-g\\d+-[hs]\\d+");

    /** One allocation in a host chunk. */
    record Block(int chunk, long offset, long size) {
    }

    private record Chunk(Path path, MemorySegment segment, TreeMap<Long, Long> free) {
    }

    private final String prefix;
    private final long maxBytes;
    /** Bytes a growth adds at least (Triton's shm-growth-byte-size); 0: double the last chunk. */
    private long growthBytes;
    private final Arena arena = Arena.ofShared();
    private final List<Chunk> chunks = new CopyOnWriteArrayList<>();
    private final Map<Integer, MemorySegment> stubChunks = new ConcurrentHashMap<>();
    private long totalBytes;
    private boolean closed;

    /** The prefixes of the regions not yet closed, by owner (a backend's socket folder); see {@link #unlinkAll}. */
    private static final Map<Path, Set<String>> LIVE = new ConcurrentHashMap<>();
    private @org.jspecify.annotations.Nullable Path owner;

    private SharedRegion(String prefix, long maxBytes) {
        this.prefix = prefix;
        this.maxBytes = maxBytes;
    }

    /** A region owned by {@code owner}: {@link #unlinkAll(Path)} removes its files if it is still open then. */
    static SharedRegion create(int generation, long initialBytes, long maxBytes, Path owner) {
        return create(generation, initialBytes, maxBytes, 0, owner);
    }

    /**
     * A region owned by {@code owner} that grows by multiples of {@code growthBytes} (Triton's
     * {@code shm-growth-byte-size}: the smallest multiple that holds the request), or by doubling
     * its last chunk when it is 0.
     */
    static SharedRegion create(int generation, long initialBytes, long maxBytes, long growthBytes, Path owner) {
        SharedRegion r = create(generation, initialBytes, maxBytes);
        synchronized (r) {
            r.growthBytes = growthBytes;
            if (!r.closed) {
                r.owner = owner;
                LIVE.computeIfAbsent(owner, o -> ConcurrentHashMap.newKeySet()).add(r.prefix);
            }
        }
        return r;
    }

    /**
     * Unlinks the files of the regions of {@code owner} that are still open: a backend closing
     * while a stub's clean-up still runs in the background (a bounded shutdown moved on) leaves no
     * file behind. The memory stays mapped until the region closes; the files are gone at once.
     * Returns how many regions were unlinked.
     */
    static int unlinkAll(Path owner) {
        Set<String> prefixes = LIVE.remove(owner);
        if (prefixes == null) {
            return 0;
        }
        int n = 0;
        for (String p : prefixes) {
            try {
                deleteMatching(p + "-");
                n++;
            } catch (UncheckedIOException e) {
                log.warn("cannot remove the shared-memory files {}-*", p, e);
            }
        }
        return n;
    }

    static SharedRegion create(int generation, long initialBytes, long maxBytes) {
        byte[] rnd = new byte[12];
        RANDOM.nextBytes(rnd);
        String prefix = FILE_PREFIX + ProcessHandle.current().pid() + "-" + HexFormat.of().formatHex(rnd) + "-g" + generation;
        SharedRegion r = new SharedRegion(prefix, maxBytes);
        try {
            synchronized (r) {
                r.addChunk(initialBytes);
            }
            r.control().set(java.lang.foreign.ValueLayout.JAVA_LONG, Wire.W_MAGIC, Wire.MAGIC);
            return r;
        } catch (RuntimeException e) {
            r.close();
            throw e;
        }
    }

    String prefix() {
        return prefix;
    }

    /** The control block (first {@link Wire#CONTROL_BYTES} of host chunk 0). */
    MemorySegment control() {
        return chunks.get(0).segment().asSlice(0, Wire.CONTROL_BYTES);
    }

    MemorySegment hostSegment(Block b) {
        return chunks.get(b.chunk()).segment().asSlice(b.offset(), b.size());
    }

    synchronized long totalBytes() {
        return totalBytes;
    }

    /** Bytes of the host chunks currently allocated (tests: quarantine accounting). */
    synchronized long allocatedBytes() {
        long free = 0;
        for (Chunk c : chunks) {
            for (long v : c.free().values()) {
                free += v;
            }
        }
        return totalBytes - Wire.CONTROL_BYTES - free;
    }

    private void addChunk(long size) {
        int k = chunks.size();
        if (k >= MAX_CHUNKS) {
            throw new BackplaneException(ErrorCode.TOO_LARGE, "shared-memory region " + prefix + " has " + k + " chunks already");
        }
        Path path = SHM_DIR.resolve(prefix + "-h" + k);
        try {
            Files.createFile(path, PosixFilePermissions.asFileAttribute(PosixFilePermissions.fromString("rw-------")));
            try (FileChannel ch = FileChannel.open(path, StandardOpenOption.READ, StandardOpenOption.WRITE)) {
                reserve(ch, size);
                MemorySegment seg = ch.map(FileChannel.MapMode.READ_WRITE, 0, size, arena);
                TreeMap<Long, Long> free = new TreeMap<>();
                long start = k == 0 ? Wire.CONTROL_BYTES : 0;
                free.put(start, size - start);
                chunks.add(new Chunk(path, seg, free));
                totalBytes += size;
            }
        } catch (IOException e) {
            try {
                Files.deleteIfExists(path);
            } catch (IOException suppressed) {
                e.addSuppressed(suppressed);
            }
            throw new BackplaneException(ErrorCode.INTERNAL, cannotGrow(totalBytes + size, "cannot create shared-memory file " + path
                    + " of " + size + " bytes: " + e + "; " + SHM_DIR + " (" + shmSpace() + ") may be full: in a container, give it more"
                    + " room (docker run --shm-size), or lower '" + StubSettings.SHM_MAX + "' so that requests this large are refused"
                    + " before they reach it"), e);
        }
    }

    private static final int RESERVE_PIECE = 1 << 20;

    /**
     * Gives the file {@code size} bytes that the file system really holds, by writing zeros (a
     * tmpfs grants a sparse file more than it has room for, and a write into such a mapping later
     * kills the process with SIGBUS; Triton's pool reserves its pages the same way). A file system
     * without room answers here, with an {@link IOException}.
     */
    private static void reserve(FileChannel ch, long size) throws IOException {
        java.nio.ByteBuffer zeros = java.nio.ByteBuffer.allocate((int) Math.min(size, RESERVE_PIECE));
        for (long at = 0; at < size;) {
            zeros.clear().limit((int) Math.min(zeros.capacity(), size - at));
            at += ch.write(zeros, at);
        }
    }

    private static String shmSpace() {
        try {
            java.nio.file.FileStore store = Files.getFileStore(SHM_DIR);
            return store.getUsableSpace() + " of " + store.getTotalSpace() + " bytes free";
        } catch (IOException e) {
            return "free space unknown: " + e;
        }
    }

    /** Triton's sentence for a pool that cannot grow, then what Backplane knows of why and what to do. */
    private String cannotGrow(long toBytes, String hint) {
        return "Failed to increase the shared memory pool size for key '" + prefix + "' to " + toBytes + " bytes. (Backplane: " + hint + ")";
    }

    /**
     * Allocates {@code n} bytes in a host chunk, growing the region when needed.
     *
     * @throws BackplaneException TOO_LARGE when the region would pass {@code maxBytes}
     */
    synchronized Block allocate(long n) {
        if (closed) {
            throw BackplaneException.unavailable("shared-memory region " + prefix + " is closed");
        }
        long size = Math.max(ALIGN, (n + ALIGN - 1) & -ALIGN);
        Block b = tryAllocate(size);
        if (b != null) {
            return b;
        }
        long last = chunks.get(chunks.size() - 1).segment().byteSize();
        long want = growthBytes > 0 ? growthBytes * ((size + growthBytes - 1) / growthBytes) : Math.max(size, 2 * last);
        want = (want + 4095) & -4096L;
        if (totalBytes + want > maxBytes) {
            want = (size + 4095) & -4096L;
        }
        if (totalBytes + want > maxBytes) {
            throw new BackplaneException(ErrorCode.TOO_LARGE, cannotGrow(totalBytes + want, "the request needs " + n
                    + " bytes of shared memory but the instance's region holds " + totalBytes + " of at most " + maxBytes + " bytes; raise '"
                    + StubSettings.SHM_MAX + "' (model parameter or backend option) or send smaller requests"));
        }
        addChunk(want);
        b = tryAllocate(size);
        if (b == null) {
            throw new IllegalStateException("a fresh chunk of " + want + " bytes cannot hold " + size);
        }
        return b;
    }

    private Block tryAllocate(long size) {
        for (int k = 0; k < chunks.size(); k++) {
            TreeMap<Long, Long> free = chunks.get(k).free();
            for (Map.Entry<Long, Long> e : free.entrySet()) {
                if (e.getValue() >= size) {
                    long off = e.getKey();
                    long rest = e.getValue() - size;
                    free.remove(off);
                    if (rest > 0) {
                        free.put(off + size, rest);
                    }
                    return new Block(k, off, size);
                }
            }
        }
        return null;
    }

    synchronized void free(Block b) {
        if (closed) {
            return;
        }
        TreeMap<Long, Long> free = chunks.get(b.chunk()).free();
        long off = b.offset();
        long size = b.size();
        Map.Entry<Long, Long> next = free.ceilingEntry(off);
        if (next != null && off + size == next.getKey()) {
            size += next.getValue();
            free.remove(next.getKey());
        }
        Map.Entry<Long, Long> prev = free.floorEntry(off);
        if (prev != null && prev.getKey() + prev.getValue() == off) {
            free.put(prev.getKey(), prev.getValue() + size);
        } else {
            free.put(off, size);
        }
    }

    /**
     * The bytes {@code [offset, offset+length)} of stub chunk {@code chunk}, after checking both
     * against the chunk's size.
     *
     * @throws BackplaneException INTERNAL (protocol violation) when out of bounds or unknown
     */
    MemorySegment stubSlice(long chunk, long offset, long length) {
        if (length == 0) {
            return EMPTY;
        }
        if (chunk < 0 || chunk >= MAX_CHUNKS) {
            throw Wire.protocol("stub chunk index " + chunk + " is out of range");
        }
        MemorySegment seg = stubChunks.computeIfAbsent((int) chunk, this::mapStubChunk);
        if (offset < 0 || length < 0 || offset > seg.byteSize() - length) {
            throw Wire.protocol("offset " + offset + " + length " + length + " lies outside stub chunk " + chunk + " of "
                    + seg.byteSize() + " bytes");
        }
        return seg.asSlice(offset, length);
    }

    /** Bounds-checked slice of a host chunk (offsets echoed by the stub). */
    MemorySegment hostSlice(long chunk, long offset, long length) {
        if (chunk < 0 || chunk >= chunks.size()) {
            throw Wire.protocol("host chunk index " + chunk + " is out of range");
        }
        MemorySegment seg = chunks.get((int) chunk).segment();
        if (offset < 0 || length < 0 || offset > seg.byteSize() - length) {
            throw Wire.protocol("offset " + offset + " + length " + length + " lies outside host chunk " + chunk);
        }
        return seg.asSlice(offset, length);
    }

    private MemorySegment mapStubChunk(int k) {
        Path path = SHM_DIR.resolve(prefix + "-s" + k);
        try {
            if (!Files.isRegularFile(path, LinkOption.NOFOLLOW_LINKS)) {
                throw Wire.protocol("stub chunk " + path + " is not a regular file");
            }
            try (FileChannel ch = FileChannel.open(path, StandardOpenOption.READ, LinkOption.NOFOLLOW_LINKS)) {
                return ch.map(FileChannel.MapMode.READ_ONLY, 0, ch.size(), arena);
            }
        } catch (IOException e) {
            throw Wire.protocol("cannot map stub chunk " + path + ": " + e);
        }
    }

    /** Unmaps and unlinks every file of this region (host and stub chunks). Idempotent. */
    @Override
    public void close() {
        synchronized (this) {
            if (closed) {
                return;
            }
            closed = true;
            if (owner != null) {
                Set<String> live = LIVE.get(owner);
                if (live != null) {
                    live.remove(prefix);
                }
            }
        }
        try {
            arena.close();
        } catch (IllegalStateException e) {
            log.warn("shared-memory region {} still in use at close", prefix, e);
        }
        deleteMatching(prefix + "-");
    }

    private static void deleteMatching(String namePrefix) {
        try (DirectoryStream<Path> ds = Files.newDirectoryStream(SHM_DIR, namePrefix + "*")) {
            for (Path p : ds) {
                Files.deleteIfExists(p);
            }
        } catch (IOException e) {
            throw new UncheckedIOException("cannot remove shared-memory files " + namePrefix + "*", e);
        }
    }

    /**
     * Removes region files left by host processes that no longer run (P7). Returns their names.
     */
    static List<String> reapStale() {
        List<String> removed = new ArrayList<>();
        if (!Files.isDirectory(SHM_DIR)) {
            return removed;
        }
        try (DirectoryStream<Path> ds = Files.newDirectoryStream(SHM_DIR, FILE_PREFIX + "*")) {
            for (Path p : ds) {
                String name = p.getFileName().toString();
                if (!OWN_FILE.matcher(name).matches()) {
                    continue;
                }
                String[] parts = name.split("-");
                long pid;
                try {
                    pid = Long.parseLong(parts[1]);
                } catch (NumberFormatException e) {
                    continue;
                }
                if (pid != ProcessHandle.current().pid() && ProcessHandle.of(pid).isEmpty()) {
                    try {
                        Files.deleteIfExists(p);
                        removed.add(name);
                    } catch (IOException e) {
                        log.debug("cannot remove stale shared-memory file {}", p, e);
                    }
                }
            }
        } catch (IOException e) {
            log.warn("cannot scan {} for stale shared-memory files", SHM_DIR, e);
        }
        return removed;
    }
}
