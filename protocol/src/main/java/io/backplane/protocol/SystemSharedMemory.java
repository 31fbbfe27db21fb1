package io.backplane.protocol;

import static java.util.Objects.requireNonNull;

import io.backplane.spi.BackplaneException;
import io.backplane.spi.DataType;
import io.backplane.spi.ErrorCode;
import io.backplane.spi.Tensor;
import io.backplane.spi.host.DeviceSharedMemory;
import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.nio.file.attribute.BasicFileAttributes;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.regex.Pattern;
import org.jspecify.annotations.Nullable;

/**
 * Triton's system shared-memory extension: named regions of POSIX shared-memory objects
 * ({@code /dev/shm/<key>}) that clients register once and then name in requests instead of
 * sending tensor bytes.
 *
 * <p>A region is validated before it is opened: the key must be a plain shm object name (one
 * optional leading {@code /}, then letters, digits, {@code . _ -}; no other slash, no {@code ..}),
 * the object must exist as a regular file (links are refused) and be at least
 * {@code offset + byte_size} bytes long. It is then mapped read/write once, for its whole life.
 *
 * <p>Requests {@link #acquire acquire} a {@link Lease}: a bounds-checked slice of a region that
 * pins the mapping. Unregistering removes the name at once (new requests cannot see it) but the
 * mapping is unmapped only when its last lease closes, so a request in flight never reads an
 * unmapped page. {@link #close()} unregisters everything (at frontend shutdown).
 *
 * <p>Thread-safe. Every error is a {@link BackplaneException} naming the bad value.
 */
public final class SystemSharedMemory implements AutoCloseable {
    /** Request/response tensor parameters, as Triton's clients send them. */
    public static final String REGION = "shared_memory_region";
    public static final String OFFSET = "shared_memory_offset";
    public static final String BYTE_SIZE = "shared_memory_byte_size";

    /** The restricted-API group of these endpoints, as Triton names it ({@code --*-restricted-api=shared-memory:…}). */
    public static final String API_GROUP = "shared-memory";
    /** REST path prefixes of the system and CUDA shared-memory extensions. */
    public static final List<String> REST_PREFIXES = List.of("/v2/systemsharedmemory", "/v2/cudasharedmemory");
    /** gRPC methods of {@code inference.GRPCInferenceService} in the group. */
    public static final List<String> GRPC_METHODS = List.of("SystemSharedMemoryStatus", "SystemSharedMemoryRegister",
            "SystemSharedMemoryUnregister", "CudaSharedMemoryStatus", "CudaSharedMemoryRegister", "CudaSharedMemoryUnregister");

    private static final Pattern KEY = Pattern.compile("/?[A-Za-z0-9._-]{1,250}");
    private static final Path SHM_ROOT = Path.of("/dev/shm");

    /** What {@code status} reports about one region. */
    public record RegionStatus(String name, String key, long offset, long byteSize) {
    }

    private final Path root;
    private final DeviceSharedMemory device;
    private final Map<String, Region> regions = new TreeMap<>();
    private boolean closed;

    /** A registry over {@code /dev/shm}, without CUDA regions. */
    public SystemSharedMemory() {
        this(SHM_ROOT);
    }

    /** A registry over another folder that stands for {@code /dev/shm} (tests), without CUDA regions. */
    public SystemSharedMemory(Path root) {
        this(root, DeviceSharedMemory.unavailable());
    }

    /**
     * A registry over {@code /dev/shm} that also resolves the names of {@code device}'s CUDA
     * regions in requests (Triton's one namespace for both kinds), and closes it at {@link #close()}.
     */
    public SystemSharedMemory(DeviceSharedMemory device) {
        this(SHM_ROOT, device);
    }

    /** A registry over {@code root} with {@code device}'s CUDA regions (tests). */
    public SystemSharedMemory(Path root, DeviceSharedMemory device) {
        this.root = requireNonNull(root, "root is null");
        this.device = requireNonNull(device, "device is null");
    }

    /** The CUDA shared-memory regions ({@link DeviceSharedMemory#available()} false without a GPU). */
    public DeviceSharedMemory device() {
        return device;
    }

    /** Whether {@code name} is a system region (for the CUDA register's one-namespace check). */
    public synchronized boolean contains(String name) {
        return regions.containsKey(name);
    }

    /** Registers {@code name} as {@code byteSize} bytes of shm object {@code key} from {@code offset}. */
    public void register(String name, String key, long offset, long byteSize) {
        requireNonNull(name, "name is null");
        requireNonNull(key, "key is null");
        if (name.isEmpty()) {
            throw BackplaneException.invalid("shared-memory region name is empty");
        }
        if (!KEY.matcher(key).matches() || key.equals("/.") || key.equals("/..") || key.equals(".") || key.equals("..")) {
            throw BackplaneException.invalid("shared-memory key '" + key + "' is not a POSIX shm object name: use '/name' with letters, digits, '.', '_' or '-'");
        }
        if (offset < 0) {
            throw BackplaneException.invalid("shared-memory region '" + name + "': offset " + offset + " is negative");
        }
        synchronized (this) {
            if (closed) {
                throw BackplaneException.unavailable("shared-memory registry is closed");
            }
            if (regions.containsKey(name) || device.contains(name)) {
                throw new BackplaneException(ErrorCode.INVALID_ARGUMENT, "shared-memory region '" + name
                        + "' is already registered; unregister it first");
            }
            String file = key.startsWith("/") ? key.substring(1) : key;
            Path path = root.resolve(file);
            Arena arena = Arena.ofShared();
            MemorySegment segment;
            try {
                // The object is opened first, as Triton does, so a missing key is reported as missing whatever the sizes.
                BasicFileAttributes attrs = Files.readAttributes(path, BasicFileAttributes.class, LinkOption.NOFOLLOW_LINKS);
                if (byteSize <= 0) {
                    throw BackplaneException.invalid("shared-memory region '" + name + "': byte_size " + byteSize + " must be positive");
                }
                if (offset > Long.MAX_VALUE - byteSize) {
                    throw BackplaneException.invalid("shared-memory region '" + name + "': offset " + offset + " + byte_size " + byteSize + " overflows");
                }
                if (!attrs.isRegularFile()) {
                    throw BackplaneException.invalid("shared-memory key '" + key + "' is not a shared-memory object (a link or a folder)");
                }
                if (attrs.size() < offset + byteSize) {
                    throw BackplaneException.invalid("shared-memory key '" + key + "' is " + attrs.size() + " bytes; region '" + name
                            + "' needs offset " + offset + " + byte_size " + byteSize + " = " + (offset + byteSize));
                }
                try (FileChannel ch = FileChannel.open(path, StandardOpenOption.READ, StandardOpenOption.WRITE, LinkOption.NOFOLLOW_LINKS)) {
                    segment = ch.map(FileChannel.MapMode.READ_WRITE, offset, byteSize, arena);
                }
            } catch (NoSuchFileException e) {
                arena.close();
                // Triton's sentence and code (INTERNAL, as its shared-memory manager answers and its QA tests expect).
                throw BackplaneException.internal("Unable to open shared memory region: '" + key + "': no such shared-memory object;"
                        + " create it (shm_open) before registering");
            } catch (IOException e) {
                arena.close();
                throw BackplaneException.invalid("shared-memory key '" + key + "' cannot be mapped: " + e.getMessage());
            } catch (RuntimeException e) {
                arena.close();
                throw e;
            }
            regions.put(name, new Region(name, key, offset, byteSize, arena, segment));
        }
    }

    /** Unregisters {@code name}; its mapping goes when the last request using it ends. */
    public void unregister(String name) {
        Region r;
        synchronized (this) {
            r = regions.remove(name);
        }
        if (r == null) {
            throw BackplaneException.notFound("shared-memory region '" + name + "' is not registered");
        }
        r.release();
    }

    /** Unregisters every region. */
    public void unregisterAll() {
        List<Region> all;
        synchronized (this) {
            all = new ArrayList<>(regions.values());
            regions.clear();
        }
        all.forEach(Region::release);
    }

    /** Every region, or only {@code name} (NOT_FOUND when it is not registered). */
    public synchronized List<RegionStatus> status(@Nullable String name) {
        if (name != null) {
            Region r = regions.get(name);
            if (r == null) {
                throw BackplaneException.notFound("shared-memory region '" + name + "' is not registered");
            }
            return List.of(r.status());
        }
        return regions.values().stream().map(Region::status).toList();
    }

    /**
     * A slice of {@code byteSize} bytes at {@code offset} within region {@code name}, pinned until
     * the lease closes. {@code what} names the tensor in errors.
     */
    public Lease acquire(String name, long offset, long byteSize, String what) {
        Region r;
        synchronized (this) {
            r = regions.get(name);
            if (r == null && device.contains(name)) {
                return new Lease(device.acquire(name, offset, byteSize, what));
            }
            if (r == null) {
                throw BackplaneException.invalid(what + ": shared-memory region '" + name + "' is not registered");
            }
            r.refs.incrementAndGet();
        }
        if (offset < 0 || byteSize < 0 || offset > r.byteSize || byteSize > r.byteSize - offset) {
            r.release();
            throw BackplaneException.invalid(what + ": shared_memory_offset " + offset + " + shared_memory_byte_size " + byteSize
                    + " is outside region '" + name + "' of " + r.byteSize + " bytes");
        }
        return new Lease(r, r.segment.asSlice(offset, byteSize));
    }

    /**
     * An input tensor over a leased slice. Fixed-size types are a view of the mapped bytes (no
     * copy); BYTES are copied first, so a client rewriting its length prefixes during the request
     * cannot change what was validated.
     *
     * @throws BackplaneException INVALID_ARGUMENT when the slice does not hold what the shape needs
     */
    public static Tensor input(Lease lease, String name, DataType type, long[] shape) {
        if (lease.device != null && type.isFixedSize()) {
            long need = Tensor.elementCount(name, shape) * type.byteSize();
            if (need != lease.device.byteSize()) {
                throw BackplaneException.invalid("input '" + name + "': shared_memory_byte_size " + lease.device.byteSize() + " but "
                        + type.protocolName() + " shape " + java.util.Arrays.toString(shape) + " needs " + need + " bytes");
            }
        }
        MemorySegment data = lease.segment();
        if (type.isFixedSize()) {
            long need = Tensor.elementCount(name, shape) * type.byteSize();
            if (need != data.byteSize()) {
                throw BackplaneException.invalid("input '" + name + "': shared_memory_byte_size " + data.byteSize() + " but "
                        + type.protocolName() + " shape " + java.util.Arrays.toString(shape) + " needs " + need + " bytes");
            }
            return Tensor.of(name, type, shape, data);
        }
        return Tensor.of(name, type, shape, MemorySegment.ofArray(data.toArray(java.lang.foreign.ValueLayout.JAVA_BYTE)));
    }

    /**
     * Copies output {@code t} into a leased slice.
     *
     * @return the bytes written
     * @throws BackplaneException INVALID_ARGUMENT when the output is larger than the slice
     */
    public static long write(Tensor t, Lease lease) {
        if (lease.device != null) {
            if (t.byteSize() > lease.device.byteSize()) {
                throw BackplaneException.invalid("output '" + t.name() + "' is " + t.byteSize() + " bytes but its shared_memory_byte_size is "
                        + lease.device.byteSize() + "; register a larger region");
            }
            lease.device.copyFromHost(t.data(), t.byteSize()); // host to device, through the driver
            return t.byteSize();
        }
        MemorySegment dst = lease.segment();
        if (t.byteSize() > dst.byteSize()) {
            throw BackplaneException.invalid("output '" + t.name() + "' is " + t.byteSize() + " bytes but its shared_memory_byte_size is "
                    + dst.byteSize() + "; register a larger region");
        }
        MemorySegment.copy(t.data(), 0, dst, 0, t.byteSize());
        return t.byteSize();
    }

    /** Unregisters everything, CUDA regions included; later registrations fail. */
    @Override
    public void close() {
        synchronized (this) {
            closed = true;
        }
        unregisterAll();
        device.close();
    }

    /**
     * A pinned slice of a region; close exactly once when the request is done with it. A slice of
     * a CUDA region is copied device to host on the first {@link #segment()} (an input) into host
     * memory this lease owns, and written host to device by {@link #write} (an output).
     */
    public static final class Lease implements AutoCloseable {
        private final @Nullable Region region;
        private @Nullable MemorySegment segment;
        private final DeviceSharedMemory.@Nullable Lease device;
        private @Nullable Arena staging;
        private boolean closed;

        private Lease(Region region, MemorySegment segment) {
            this.region = region;
            this.segment = segment;
            this.device = null;
        }

        private Lease(DeviceSharedMemory.Lease device) {
            this.region = null;
            this.device = device;
        }

        /** The bytes (mapped, or for a CUDA region a host copy of the device bytes); valid until this lease closes. */
        public synchronized MemorySegment segment() {
            if (segment == null) {
                if (closed) {
                    throw new IllegalStateException("shared-memory lease is closed");
                }
                DeviceSharedMemory.Lease d = java.util.Objects.requireNonNull(device);
                Arena a = Arena.ofShared();
                try {
                    MemorySegment host = a.allocate(Math.max(1, d.byteSize()), 64).asSlice(0, d.byteSize());
                    d.copyToHost(host); // device to host, through the driver
                    segment = host;
                    staging = a;
                } catch (RuntimeException e) {
                    a.close();
                    throw e;
                }
            }
            return segment;
        }

        @Override
        public void close() {
            Arena a;
            synchronized (this) {
                if (closed) {
                    return;
                }
                closed = true;
                a = staging;
                staging = null;
            }
            if (a != null) {
                a.close();
            }
            if (device != null) {
                device.close();
            } else {
                java.util.Objects.requireNonNull(region).release();
            }
        }
    }

    private static final class Region {
        final String name;
        final String key;
        final long offset;
        final long byteSize;
        final Arena arena;
        final MemorySegment segment;
        /** One for the registration, one per lease; a region still in the map has at least one. */
        final AtomicInteger refs = new AtomicInteger(1);

        Region(String name, String key, long offset, long byteSize, Arena arena, MemorySegment segment) {
            this.name = name;
            this.key = key;
            this.offset = offset;
            this.byteSize = byteSize;
            this.arena = arena;
            this.segment = segment;
        }

        RegionStatus status() {
            return new RegionStatus(name, key, offset, byteSize);
        }

        void release() {
            if (refs.decrementAndGet() == 0) {
                arena.close();
            }
        }
    }
}
