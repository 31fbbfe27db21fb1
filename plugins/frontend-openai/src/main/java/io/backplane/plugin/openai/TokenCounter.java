package io.backplane.plugin.openai;

import static java.util.Objects.requireNonNull;

import ai.djl.huggingface.tokenizers.Encoding;
import ai.djl.huggingface.tokenizers.HuggingFaceTokenizer;
import io.backplane.spi.BackplaneException;
import io.backplane.spi.ErrorCode;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.locks.ReentrantReadWriteLock;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Counts tokens of a text with a model's own Hugging Face tokenizer ({@code tokenizer.json}), through DJL's binding
 * of the Rust {@code tokenizers} library ({@code ai.djl.huggingface:tokenizers}), the library {@code transformers}'
 * fast tokenizers run on: a count here equals {@code len(tokenizer(text, add_special_tokens=...).input_ids)}.
 *
 * <h2>Which count</h2>
 * {@link #count(String)} counts without special tokens, as vLLM counts a chat prompt: the chat template already wrote
 * the BOS and the turn markers as text, which the tokenizer maps to their special ids, and vLLM's chat endpoint
 * tokenizes the rendered prompt with {@code add_special_tokens=False}. {@link #count(String, boolean)} with
 * {@code true} counts as vLLM's completions endpoint does for a raw prompt ({@code add_special_tokens=True}: a
 * Llama-style tokenizer's post-processor adds BOS). Truncation and padding are off: the count is the whole text's.
 *
 * <h2>Native library and offline use</h2>
 * The DJL jar bundles {@code libtokenizers} for linux-x86_64, linux-aarch64, osx-aarch64 and win-x86_64; on first use
 * DJL extracts it to its cache folder ({@code DJL_CACHE_DIR} or {@code ENGINE_CACHE_DIR}, system property or
 * environment variable; default {@code ~/.djl.ai/tokenizers}) and loads it from there, without the network (checked
 * by this module's tests, which run with {@code -Dai.djl.offline=true} and the cache under {@code target/}). The
 * bundled library is the CPU flavour, which DJL accepts on CUDA machines too. Only on a platform the jar lacks would
 * DJL try its download site; {@code -Dai.djl.offline=true} (or {@code DJL_OFFLINE=true}) forbids that. Where the
 * library cannot be loaded, {@link #load} logs why and returns empty, and the frontend falls back to the counts the
 * model itself reports. (DJL probes CUDA while it picks the platform and may log a warning where the driver is
 * missing or old; it is harmless for the tokenizer.) The bundled library is the Rust {@code tokenizers} 0.21; the
 * tests compare its counts with {@code transformers} on the Python {@code tokenizers} of the model environment.
 *
 * <p>Thread-safe: {@link #count} may run on any number of threads at once; {@link #close} waits for running counts,
 * frees the native tokenizer exactly once, and later counts fail with {@link IllegalStateException}.
 */
public final class TokenCounter implements AutoCloseable {

    private static final Logger LOG = LoggerFactory.getLogger(TokenCounter.class);
    private static final AtomicBoolean NATIVE_WARNED = new AtomicBoolean();

    private final Path file;
    private final HuggingFaceTokenizer tokenizer;
    private final ReentrantReadWriteLock lock = new ReentrantReadWriteLock();
    private boolean closed; // guarded by lock

    private TokenCounter(Path file, HuggingFaceTokenizer tokenizer) {
        this.file = file;
        this.tokenizer = tokenizer;
    }

    /**
     * The tokenizer of a Hugging Face tokenizer folder (a model's folder, or its tokenizer subfolder).
     *
     * @return empty where the folder has no {@code tokenizer.json} (a slow-only tokenizer, or none), or where the
     *     native tokenizers library cannot be loaded on this machine (logged once, with the reason)
     * @throws BackplaneException INVALID_ARGUMENT naming the file where {@code tokenizer.json} cannot be read or
     *     parsed by the tokenizers library
     */
    public static Optional<TokenCounter> load(Path tokenizerDir) {
        requireNonNull(tokenizerDir, "tokenizerDir is null");
        Path file = tokenizerDir.resolve("tokenizer.json");
        if (!Files.isRegularFile(file)) {
            return Optional.empty();
        }
        HuggingFaceTokenizer tokenizer;
        try {
            tokenizer = HuggingFaceTokenizer.newInstance(file, Map.of(
                    "addSpecialTokens", "false",
                    "truncation", "false",
                    "padding", "false"));
        } catch (UnsatisfiedLinkError | NoClassDefFoundError e) {
            if (NATIVE_WARNED.compareAndSet(false, true)) {
                LOG.warn("the Hugging Face tokenizers native library cannot be loaded ({}); token counts fall back to the"
                        + " models' own", e.toString());
            }
            return Optional.empty();
        } catch (Exception e) {
            if (isNativeLoadFailure(e)) {
                if (NATIVE_WARNED.compareAndSet(false, true)) {
                    LOG.warn("the Hugging Face tokenizers native library cannot be loaded ({}); token counts fall back to"
                            + " the models' own", e.toString());
                }
                return Optional.empty();
            }
            throw new BackplaneException(ErrorCode.INVALID_ARGUMENT, "cannot load the tokenizer " + file + ": " + e.getMessage()
                    + "; check that it is a Hugging Face tokenizer.json (as tokenizer.save_pretrained writes it)", e);
        }
        LOG.debug("token counter for {}", file);
        return Optional.of(new TokenCounter(file, tokenizer));
    }

    private static boolean isNativeLoadFailure(Throwable e) {
        for (Throwable t = e; t != null; t = t.getCause()) {
            if (t instanceof UnsatisfiedLinkError || t instanceof ai.djl.engine.EngineException) {
                return true;
            }
            String m = String.valueOf(t.getMessage());
            if (m.contains("libtokenizers") || m.contains("Failed to load Huggingface native library")) {
                return true;
            }
        }
        return false;
    }

    /** The tokens of {@code text} without special tokens added (see the type's Javadoc). */
    public int count(String text) {
        return count(text, false);
    }

    /**
     * The tokens of {@code text}, with the tokenizer's special tokens added ({@code add_special_tokens=True}) or not.
     *
     * @throws IllegalStateException after {@link #close}
     */
    public int count(String text, boolean addSpecialTokens) {
        requireNonNull(text, "text is null");
        lock.readLock().lock();
        try {
            if (closed) {
                throw new IllegalStateException("the token counter of " + file + " is closed");
            }
            Encoding encoding = tokenizer.encode(text, addSpecialTokens, false);
            return encoding.getIds().length;
        } finally {
            lock.readLock().unlock();
        }
    }

    /** The {@code tokenizer.json} this counter reads. */
    public Path file() {
        return file;
    }

    /** Frees the native tokenizer, after any counts in progress; idempotent. */
    @Override
    public void close() {
        lock.writeLock().lock();
        try {
            if (!closed) {
                closed = true;
                tokenizer.close();
            }
        } finally {
            lock.writeLock().unlock();
        }
    }

    @Override
    public String toString() {
        return "TokenCounter[" + file + "]";
    }
}
